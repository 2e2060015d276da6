# A stand-in for nixpkgs holding only what flake.nix uses, each "package" an attribute
# set shaped like a derivation (type, name, outPath) that also keeps the arguments it was
# made with. It builds nothing: it lets runner/tests/flake.rs evaluate the flake's output
# structure on machines that can't fetch nixpkgs. Used by that test only.
{ system ? "x86_64-linux", ... }:
let
  drv = name: args: args // {
    type = "derivation";
    inherit name system;
    outPath = "/nix/store/00000000000000000000000000000000-${name}";
  };
  pkg = name: drv name { };
in
{
  lib = {
    makeBinPath = ps: builtins.concatStringsSep ":" (map (p: "${p}/bin") ps);
    assertMsg = cond: msg: if cond then true else throw msg;
    removeSuffix = suffix: s:
      let
        n = builtins.stringLength s;
        k = builtins.stringLength suffix;
      in
      if k <= n && builtins.substring (n - k) k s == suffix then builtins.substring 0 (n - k) s else s;
  };
  rustPlatform.buildRustPackage = args: drv "${args.pname}-${args.version}" args;
  mkShell = args: drv "shell" args;
  fetchurl = { url, sha256 }: drv (baseNameOf url) { inherit url sha256; };
  writeShellApplication = { name, text, ... }@args: drv name args;
  qemu = pkg "qemu";
  mmdebstrap = pkg "mmdebstrap";
  e2fsprogs = pkg "e2fsprogs";
  wireshark-cli = pkg "wireshark-cli";
  kmod = pkg "kmod";
  iproute2 = pkg "iproute2";
  dpkg = pkg "dpkg";
  coreutils = pkg "coreutils";
  util-linux = pkg "util-linux";
  debian-archive-keyring = pkg "debian-archive-keyring";
  pkg-config = pkg "pkg-config";
  makeWrapper = pkg "makeWrapper";
  xz = pkg "xz";
  cargo = pkg "cargo";
  rustc = pkg "rustc";
  clippy = pkg "clippy";
  rustfmt = pkg "rustfmt";
  cargo-insta = pkg "cargo-insta";
}
