{
  # One-command reproduction with Nix:
  #   nix run .                          # runs suites/nfs-read-100mb.yaml (the flagship suite)
  #   nix run .#reproduce -- BUNDLE      # vmrepro replay BUNDLE (a file made by `vmrepro bundle`)
  #   nix develop                        # a shell with cargo, QEMU, mmdebstrap, e2fsprogs, kmod, iproute2
  #   nix build                          # the vmrepro binary, wrapped with its runtime tools
  #   nix flake check                    # builds it and runs the tests that boot no VM
  #
  # Images still come from the Debian archive: outside Debian there is no apt source to
  # take the archive address from, so set VMREPRO_DEBIAN_MIRROR to a Debian mirror (or a
  # snapshot archive URL for exact pinned versions). The pinned kernel packages are also
  # available as fixed-output fetches (URL + SHA-256 from images/kernels.yaml, through
  # nix/pinned-kernels.json) from an archive you name; no archive is written here:
  #   nix build --impure --expr '((builtins.getFlake (toString ./.)).lib.x86_64-linux.pinnedKernels
  #     { debianArchive = "<archive URL>"; })."linux-image-6.1.0-50-cloud-amd64"'
  # (or set VMREPRO_DEBIAN_MIRROR and call it with `{ }` under --impure).
  #
  # What was checked on the project's machines (Debian's nix-bin 2.8, no access to nixpkgs):
  # `nix-instantiate --parse flake.nix`, and the output structure evaluated against the
  # stand-in in nix/test/stub-nixpkgs (runner/tests/flake.rs). Nothing here was built.
  description = "vmrepro: declarative reproducibility suites on QEMU virtual machines";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-24.11";

  outputs = { self, nixpkgs }:
    let
      system = "x86_64-linux";
      pkgs = import nixpkgs { inherit system; };
      lib = pkgs.lib;
      pins = builtins.fromJSON (builtins.readFile ./nix/pinned-kernels.json);
      runtimeTools = with pkgs; [ qemu mmdebstrap e2fsprogs kmod iproute2 dpkg coreutils util-linux debian-archive-keyring bubblewrap ];
      common = {
        version = "0.1.0";
        src = ./.;
        cargoLock.lockFile = ./Cargo.lock;
        nativeBuildInputs = [ pkgs.pkg-config pkgs.makeWrapper ];
        buildInputs = [ pkgs.xz ];
        # build.rs records the commit in environment.json and the reports.
        VMREPRO_GIT_COMMIT = self.rev or self.dirtyRev or "unknown";
      };
      vmrepro = pkgs.rustPlatform.buildRustPackage (common // {
        pname = "vmrepro";
        # The suites boot VMs and need network namespaces: `checks.tests` runs the rest.
        doCheck = false;
        postInstall = ''
          mkdir -p $out/share/vmrepro
          cp -r images suites $out/share/vmrepro/
          wrapProgram $out/bin/vmrepro \
            --prefix PATH : ${lib.makeBinPath runtimeTools} \
            --set-default VMREPRO_IMAGES $out/share/vmrepro/images
        '';
      });
      # The tests that boot no VM: `cargo fast` (.cargo/config.toml; docs/src/contributing.md,
      # "The tests"), the same list (runner/tests/flake.rs checks that they agree).
      vmFreeTests = pkgs.rustPlatform.buildRustPackage (common // {
        pname = "vmrepro-vm-free-tests";
        doCheck = true;
        cargoTestFlags = [ "--lib" "--test" "plans" "--test" "bad_suites" "--test" "parsers" "--test" "analyse" "--test" "publish" "--test" "kcidb" "--test" "hostile" "--test" "hostile_images" "--test" "repin" "--test" "flake" "--test" "readme" "--test" "schema" "--test" "fuzz_corpus" "--test" "wire" "--example" "rto_carryover_model" ];
        nativeCheckInputs = [ pkgs.e2fsprogs pkgs.wireshark-cli ];
        CI = "true";
      });
      flagship = pkgs.writeShellApplication {
        name = "vmrepro-nfs-read-100mb";
        text = ''exec ${vmrepro}/bin/vmrepro run ${vmrepro}/share/vmrepro/suites/nfs-read-100mb.yaml "$@"'';
      };
      reproduce = pkgs.writeShellApplication {
        name = "vmrepro-reproduce";
        text = ''exec ${vmrepro}/bin/vmrepro replay "$@"'';
      };
      # Every pinned package of images/kernels.yaml as a fixed-output fetch from the
      # Debian archive `debianArchive` (the user's; default: $VMREPRO_DEBIAN_MIRROR, which
      # needs --impure), keyed by package name.
      pinnedKernels = { debianArchive ? builtins.getEnv "VMREPRO_DEBIAN_MIRROR" }:
        assert lib.assertMsg (debianArchive != "")
          "pinnedKernels: give { debianArchive = \"<Debian archive URL>\"; } or set VMREPRO_DEBIAN_MIRROR and use --impure";
        builtins.listToAttrs (map
          (k: {
            name = k.package;
            value = pkgs.fetchurl {
              url = "${lib.removeSuffix "/" debianArchive}/${k.filename}";
              sha256 = k.sha256;
            };
          })
          (pins.kernels ++ pins.sources));
    in
    {
      packages.${system} = {
        default = vmrepro;
        inherit vmrepro reproduce;
      };
      apps.${system} = {
        default = { type = "app"; program = "${flagship}/bin/vmrepro-nfs-read-100mb"; };
        reproduce = { type = "app"; program = "${reproduce}/bin/vmrepro-reproduce"; };
      };
      devShells.${system}.default = pkgs.mkShell {
        packages = runtimeTools ++ [ pkgs.cargo pkgs.rustc pkgs.clippy pkgs.rustfmt pkgs.cargo-insta pkgs.pkg-config pkgs.xz ];
      };
      checks.${system} = {
        build = vmrepro;
        tests = vmFreeTests;
      };
      lib.${system} = {
        inherit pinnedKernels;
        pinned = pins;
      };
    };
}
