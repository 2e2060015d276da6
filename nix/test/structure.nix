# The output structure of flake.nix evaluated against nix/test/stub-nixpkgs (see there),
# for runner/tests/flake.rs: `nix-instantiate --eval --strict --json nix/test/structure.nix`.
let
  flake = import ../../flake.nix;
  sys = "x86_64-linux";
  out = flake.outputs {
    self = { outPath = ../..; rev = "0123456789abcdef0123456789abcdef01234567"; };
    nixpkgs = { outPath = ./stub-nixpkgs; };
  };
  names = builtins.attrNames;
  kernels = out.lib.${sys}.pinnedKernels { debianArchive = "http://archive.example/debian/"; };
in
{
  packages = names out.packages.${sys};
  apps = names out.apps.${sys};
  appTypes = map (a: a.type) (builtins.attrValues out.apps.${sys});
  appPrograms = map (a: a.program) (builtins.attrValues out.apps.${sys});
  reproduceText = out.packages.${sys}.reproduce.text;
  flagshipProgram = out.apps.${sys}.default.program;
  devShells = names out.devShells.${sys};
  checks = names out.checks.${sys};
  testFlags = out.checks.${sys}.tests.cargoTestFlags;
  packageCommit = out.packages.${sys}.default.VMREPRO_GIT_COMMIT;
  lockFile = toString out.packages.${sys}.default.cargoLock.lockFile;
  kernels = names kernels;
  kernelFetches = map (k: { inherit (k) url sha256; }) (builtins.attrValues kernels);
}
