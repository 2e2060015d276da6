//! Compiling one VM of a validated suite: its kernel, rootfs and sizes with the
//! defaults applied (the `DEFAULT_*` constants of [`crate::plan`]), its files read and
//! hashed, and the runner's setup steps before the user's (net conditions, sysctl, file
//! copies, the profile).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::Duration;

use crate::infra::images::kernel::KernelSource;
use crate::infra::images::{Catalog, DEFAULT_FLAVOUR, DEFAULT_ROOTFS};
use crate::plan::{
    names, netem, shell_quote, Dependency, Export, FilePlan, ProfilePlan, ServerParams, StepKind, StepPlan, VmPlan,
    DEFAULT_BOOT_TIMEOUT, DEFAULT_CPUS, DEFAULT_MEMORY_MIB,
};
use crate::schema::{Accel, ProfileSpec, SpecError, SuiteFile, SuiteSpec, VmSpec};
use crate::suite::validate::Validated;

/// The step timeouts of a suite: its user steps' default, and the runner's own setup
/// steps' (net conditions, sysctl, file copies, the profile), which need what they
/// need, not a user default meant for quick steps: never less than the default (the
/// modern profile alone waits out an 11 s NFSv4 grace period).
#[derive(Debug, Clone, Copy)]
pub(super) struct Timeouts {
    /// A user step's, unless it gives its own.
    pub(super) step: Duration,
    /// The runner's setup steps'.
    pub(super) setup: Duration,
}

/// Compiles VM `i` of the suite (`vm`), whose peers' addresses are `addresses`.
///
/// Errors: [`SpecError::Read`] when one of its files or its profile script can't be
/// read.
pub(super) fn compile_vm(
    v: &Validated<'_>,
    catalog: &Catalog,
    i: usize,
    vm: &VmSpec,
    addresses: &BTreeMap<String, Ipv4Addr>,
    timeouts: Timeouts,
) -> Result<VmPlan, SpecError> {
    let file = v.file();
    let s = &file.spec;
    let d = &s.defaults;
    let key = format!("vms[{i}]");
    let setup_timeout = timeouts.setup;
    let mut steps = Vec::new();
    if let Some(net) = &vm.net {
        steps.push(
            StepPlan::new(
                names::NET_CONDITIONS,
                netem::net_script(net, addresses),
                StepKind::NetConditions,
                setup_timeout,
            )
            .origin(&format!("{key}.net")),
        );
    }
    let sysctl: BTreeMap<String, String> = vm.sysctl.iter().map(|(k, v)| (k.clone(), sysctl_value(v))).collect();
    if !sysctl.is_empty() {
        steps.push(
            StepPlan::new(names::SYSCTL, sysctl_script(&sysctl), StepKind::Sysctl, setup_timeout)
                .origin(&format!("{key}.sysctl")),
        );
    }
    let files = file_steps(file, vm, &key, setup_timeout, &mut steps)?;
    let profile = vm.profile.as_ref().map(|p| profile_plan(p, catalog, s, &vm.name));
    if let Some(p) = &profile {
        steps.push(profile_step(file, p, catalog, &key, setup_timeout)?);
    }
    for (j, st) in vm.steps.iter().enumerate() {
        let mut step = StepPlan::new(&st.name, st.run.clone(), StepKind::User, st.timeout.unwrap_or(timeouts.step))
            .after(st.after.iter().map(|a| Dependency::parse(a)))
            .origin(&format!("{key}.steps[{j}]"));
        step.expect_exit = st.expect_exit.unwrap_or(0);
        step.snapshot = st.snapshot;
        steps.push(step);
    }
    Ok(VmPlan {
        name: vm.name.clone(),
        kernel: kernel_of(v, file, vm),
        rootfs: vm.rootfs.clone().or_else(|| d.rootfs.clone()).unwrap_or_else(|| DEFAULT_ROOTFS.into()),
        packages: {
            let mut p: Vec<_> = d.packages.iter().chain(&vm.packages).cloned().collect();
            p.sort();
            p.dedup();
            p
        },
        address: vm.address,
        memory_mib: vm.memory.or(d.memory).unwrap_or(DEFAULT_MEMORY_MIB),
        cpus: vm.cpus.or(d.cpus).unwrap_or(DEFAULT_CPUS),
        accel: vm.accel.or(d.accel).unwrap_or(Accel::Auto),
        boot_timeout: vm.boot_timeout.or(d.boot_timeout).unwrap_or(DEFAULT_BOOT_TIMEOUT),
        cmdline: vm.cmdline.clone(),
        net: vm.net.clone(),
        env: vm.env.clone(),
        sysctl,
        files,
        profile,
        steps,
        capture: capture_of(s, vm),
    })
}

/// The kernel `vm` boots: a source build, a pinned Debian package or a local file.
fn kernel_of(v: &Validated<'_>, file: &SuiteFile, vm: &VmSpec) -> KernelSource {
    if let (Some(tree), Some(rev)) = (&vm.kernel.tree, &vm.kernel.rev) {
        let (resolved, checkout) = file.trees().resolve(tree, rev).expect("validated: the tree's revision resolves");
        KernelSource::Tree(crate::infra::images::tree::TreeKernel {
            tree: tree.clone(),
            rev: rev.clone(),
            resolved,
            checkout,
            fragments: vm.kernel.fragments.iter().map(|f| file.resolve(f)).collect(),
            patches: vm.kernel.patches.iter().map(|f| file.resolve(f)).collect(),
        })
    } else if let Some(src) = &vm.kernel.source {
        KernelSource::Source(crate::infra::images::source::SourceKernel {
            source: v.source_kernel(&src.debian).clone(),
            fragments: src.fragments.iter().map(|f| file.resolve(f)).collect(),
            patches: src.patches.iter().map(|f| file.resolve(f)).collect(),
        })
    } else if let Some(series) = &vm.kernel.debian {
        let flavour = vm.kernel.flavour.as_deref().unwrap_or(DEFAULT_FLAVOUR);
        KernelSource::Debian(v.debian_kernel(series, flavour).clone())
    } else {
        let image = vm.kernel.path.as_ref().expect("validated: a kernel has debian, source or path");
        KernelSource::Local { image: file.resolve(image), modules: vm.kernel.modules.as_ref().map(|m| file.resolve(m)) }
    }
}

/// The files `vm` copies in (read and hashed now), each pushed onto `steps` as its copy
/// step.
///
/// Errors: [`SpecError::Invalid`] at the file's `src` when it can't be read, is a link,
/// not a regular file or over the size cap.
fn file_steps(
    file: &SuiteFile,
    vm: &VmSpec,
    key: &str,
    setup_timeout: Duration,
    steps: &mut Vec<StepPlan>,
) -> Result<Vec<FilePlan>, SpecError> {
    let mut files = Vec::new();
    for (n, f) in vm.files.iter().enumerate() {
        let src = file.resolve(&f.src);
        // No link followed, no pipe or device opened, bounded: a file from the suite
        // reaches the guest only as the regular file it names.
        let bytes = crate::path_io::read_named(&src, crate::suite::validate::files::MAX_FILE_BYTES)
            .map_err(|e| SpecError::Invalid(vec![file.error_at(&format!("{key}.files[{n}].src"), e.to_string())]))?;
        let mode = f.mode.as_deref().and_then(crate::suite::validate::parse_mode).unwrap_or(0o644);
        let fp = FilePlan {
            src,
            dest: f.dest.clone(),
            mode,
            bytes: bytes.len() as u64,
            sha256: crate::infra::hash::sha256_hex(&bytes),
        };
        let mut step = StepPlan::new(
            &names::copy_file(n + 1),
            copy_file_script(&fp),
            StepKind::CopyFile { dest: fp.dest.clone(), sha256: fp.sha256.clone() },
            setup_timeout,
        )
        .origin(&format!("{key}.files[{n}]"));
        step.stdin_file = Some(fp.src.clone());
        steps.push(step);
        files.push(fp);
    }
    Ok(files)
}

/// The step that runs profile `p`'s script (read, confined and bounded, when the
/// catalog was loaded: [`Catalog::load`]) with its parameters.
///
/// Errors: [`SpecError::Invalid`] at `<vm>.profile` when the catalog has no script of
/// that name.
fn profile_step(
    file: &SuiteFile,
    p: &ProfilePlan,
    catalog: &Catalog,
    key: &str,
    setup_timeout: Duration,
) -> Result<StepPlan, SpecError> {
    let text = catalog.profile_scripts.get(&p.name).cloned().ok_or_else(|| {
        SpecError::Invalid(vec![file.error_at(&format!("{key}.profile"), format!("no profile script {:?}", p.name))])
    })?;
    // The parameters reach the script as its environment, each value one word.
    let env: Vec<String> =
        p.params.iter().flat_map(ServerParams::env).map(|(k, v)| format!("{k}={}", shell_quote(&v))).collect();
    let script =
        if env.is_empty() { "exec /bin/sh -s".to_string() } else { format!("exec env {} /bin/sh -s", env.join(" ")) };
    Ok(StepPlan::new(&names::profile(&p.name), script, StepKind::Profile { profile: p.name.clone() }, setup_timeout)
        .stdin(text)
        .origin(&format!("{key}.profile")))
}

/// The profile `p` of VM `vm` with every parameter in force: the suite's, else the
/// profile's defaults; a server's exports are `p.exports` plus, when the VM is
/// `nfs_read.server`, `nfs_read.export` (validated: a server profile has at least one).
fn profile_plan(p: &ProfileSpec, catalog: &Catalog, suite: &SuiteSpec, vm: &str) -> ProfilePlan {
    let params = catalog.profile_params.get(&p.name).map(|d| {
        let mut exports: Vec<Export> = Vec::new();
        if let Some(path) = crate::scenarios::nfs_read::export_of(suite, vm) {
            exports.push(Export { path, options: d.export_options.clone() });
        }
        for e in p.exports.iter().flatten() {
            let options = e.options.clone().unwrap_or_else(|| d.export_options.clone());
            exports.push(Export { path: e.path.clone(), options });
        }
        ServerParams { exports, settings: p.params.over(&d.settings()) }
    });
    ProfilePlan { name: p.name.clone(), params }
}

/// A sysctl value as `sysctl -w` takes it (booleans as 1/0).
fn sysctl_value(v: &serde_yaml::Value) -> String {
    match v {
        serde_yaml::Value::Bool(b) => if *b { "1" } else { "0" }.to_string(),
        other => crate::schema::text::scalar_text(other),
    }
}

/// Sets each of `sysctl` and prints the values in force (`name = value` lines, what
/// `sysctl NAME` prints), which the results keep.
fn sysctl_script(sysctl: &BTreeMap<String, String>) -> String {
    let mut s = String::from("set -e\n");
    for (k, v) in sysctl {
        s.push_str(&format!("sysctl -q -w {}\n", shell_quote(&format!("{k}={v}"))));
    }
    let names: Vec<String> = sysctl.keys().map(|k| shell_quote(k)).collect();
    s.push_str(&format!("sysctl {}\n", names.join(" ")));
    s
}

/// Writes its stdin to `f.dest` (making the folder), sets the mode, and prints the
/// written file's SHA-256 (`sha256sum`), which the results compare with the host's.
fn copy_file_script(f: &FilePlan) -> String {
    let dest = shell_quote(&f.dest);
    let dir = shell_quote(f.dest.rsplit_once('/').map_or("/", |(d, _)| if d.is_empty() { "/" } else { d }));
    format!("set -e\nmkdir -p {dir}\ncat > {dest}\nchmod {:o} {dest}\nsha256sum {dest}\n", f.mode)
}

/// `vm`'s packet capture: its `capture:`, else `network.capture`.
fn capture_of(s: &crate::schema::SuiteSpec, vm: &VmSpec) -> Option<crate::plan::CapturePlan> {
    use crate::schema::capture::CaptureSpec;
    let mode = vm.capture.or(s.network.capture).unwrap_or(CaptureSpec::Off);
    (mode != CaptureSpec::Off).then(|| crate::plan::CapturePlan {
        snaplen: s.network.capture_snaplen.unwrap_or(crate::plan::DEFAULT_CAPTURE_SNAPLEN),
        measured_only: mode == CaptureSpec::Measured,
        max_bytes: s.network.capture_max_bytes.unwrap_or(crate::plan::DEFAULT_CAPTURE_MAX_BYTES),
    })
}
