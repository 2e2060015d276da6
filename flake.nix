{
  # One-command reproduction with Nix:
  #   nix run .            # runs suites/nfs-read-100mb.yaml (the flagship suite)
  #   nix develop          # a shell with cargo, QEMU, mmdebstrap, e2fsprogs, kmod, iproute2
  #   nix build            # the vmrepro binary, wrapped with its runtime tools
  #
  # Images still come from the Debian archive: outside Debian there is no apt source
  # to take the archive address from, so set VMREPRO_DEBIAN_MIRROR to a Debian
  # mirror (or a snapshot archive URL for exact pinned versions).
  description = "vmrepro: declarative reproducibility suites on QEMU virtual machines";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-24.11";

  outputs = { self, nixpkgs }:
    let
      system = "x86_64-linux";
      pkgs = import nixpkgs { inherit system; };
      runtimeTools = with pkgs; [ qemu mmdebstrap e2fsprogs kmod iproute2 dpkg coreutils util-linux debian-archive-keyring ];
      vmrepro = pkgs.rustPlatform.buildRustPackage {
        pname = "vmrepro";
        version = "0.1.0";
        src = ./.;
        cargoLock.lockFile = ./Cargo.lock;
        nativeBuildInputs = [ pkgs.pkg-config pkgs.makeWrapper ];
        buildInputs = [ pkgs.xz ];
        # The test suite boots VMs and needs network namespaces: run it with `cargo test`.
        doCheck = false;
        postInstall = ''
          mkdir -p $out/share/vmrepro
          cp -r images suites $out/share/vmrepro/
          wrapProgram $out/bin/vmrepro \
            --prefix PATH : ${pkgs.lib.makeBinPath runtimeTools} \
            --set-default VMREPRO_IMAGES $out/share/vmrepro/images
        '';
      };
      flagship = pkgs.writeShellScript "vmrepro-nfs-read-100mb" ''
        exec ${vmrepro}/bin/vmrepro run ${vmrepro}/share/vmrepro/suites/nfs-read-100mb.yaml "$@"
      '';
    in
    {
      packages.${system}.default = vmrepro;
      apps.${system}.default = { type = "app"; program = "${flagship}"; };
      devShells.${system}.default = pkgs.mkShell {
        packages = runtimeTools ++ [ pkgs.cargo pkgs.rustc pkgs.clippy pkgs.rustfmt pkgs.cargo-insta pkgs.pkg-config pkgs.xz ];
      };
    };
}
