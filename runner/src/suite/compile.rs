//! Compiling a validated suite into its [`Plan`]: defaults applied (the `DEFAULT_*`
//! constants of [`crate::plan`]), paths resolved against the suite's folder, the
//! `nfs_read` preset and every `measure:` entry expanded into steps.

use std::net::Ipv4Addr;

use crate::infra::images::kernel::KernelSource;
use crate::infra::images::{Catalog, DEFAULT_FLAVOUR, DEFAULT_ROOTFS};
use crate::plan::{
    names, netem, shell_quote, Dependency, Plan, StepKind, StepPlan, VmPlan, DEFAULT_BOOT_TIMEOUT, DEFAULT_CPUS,
    DEFAULT_MEMORY_MIB, DEFAULT_MTU, DEFAULT_STEP_TIMEOUT,
};
use crate::spec::{Accel, SpecError};
use crate::suite::validate::Validated;

/// Compiles a validated suite.
///
/// Errors: [`SpecError::Read`] when a profile script can't be read.
pub fn compile(v: Validated<'_>, catalog: &Catalog) -> Result<Plan, SpecError> {
    let file = v.file();
    let s = &file.spec;
    let d = &s.defaults;
    let step_timeout = d.step_timeout.unwrap_or(DEFAULT_STEP_TIMEOUT);
    let addresses: std::collections::BTreeMap<String, Ipv4Addr> =
        s.vms.iter().map(|v| (v.name.clone(), v.address)).collect();
    let mut vms: Vec<VmPlan> = Vec::new();
    for (i, vm) in s.vms.iter().enumerate() {
        let key = format!("vms[{i}]");
        let kernel = if let Some(src) = &vm.kernel.source {
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
            KernelSource::Local {
                image: file.resolve(image),
                modules: vm.kernel.modules.as_ref().map(|m| file.resolve(m)),
            }
        };
        let mut steps = Vec::new();
        if let Some(net) = &vm.net {
            steps.push(
                StepPlan::new(
                    names::NET_CONDITIONS,
                    netem::net_script(net, &addresses),
                    StepKind::NetConditions,
                    step_timeout,
                )
                .origin(&format!("{key}.net")),
            );
        }
        if let Some(p) = &vm.profile {
            let script_path = &catalog.profiles[p];
            let text = std::fs::read_to_string(script_path)
                .map_err(|e| SpecError::Read { path: script_path.clone(), source: e })?;
            let export = crate::scenarios::nfs_read::export_of(s, &vm.name);
            steps.push(
                StepPlan::new(
                    &names::profile(p),
                    format!("exec /bin/sh -s -- {}", shell_quote(&export)),
                    StepKind::Profile { profile: p.clone() },
                    step_timeout,
                )
                .stdin(text)
                .origin(&format!("{key}.profile")),
            );
        }
        for (j, st) in vm.steps.iter().enumerate() {
            let mut step = StepPlan::new(&st.name, st.run.clone(), StepKind::User, st.timeout.unwrap_or(step_timeout))
                .after(st.after.iter().map(|a| Dependency::parse(a)))
                .origin(&format!("{key}.steps[{j}]"));
            step.expect_exit = st.expect_exit.unwrap_or(0);
            step.snapshot = st.snapshot;
            steps.push(step);
        }
        vms.push(VmPlan {
            name: vm.name.clone(),
            kernel,
            rootfs: vm.rootfs.clone().or_else(|| d.rootfs.clone()).unwrap_or_else(|| DEFAULT_ROOTFS.into()),
            address: vm.address,
            memory_mib: vm.memory.or(d.memory).unwrap_or(DEFAULT_MEMORY_MIB),
            cpus: vm.cpus.or(d.cpus).unwrap_or(DEFAULT_CPUS),
            accel: vm.accel.or(d.accel).unwrap_or(Accel::Auto),
            boot_timeout: vm.boot_timeout.or(d.boot_timeout).unwrap_or(DEFAULT_BOOT_TIMEOUT),
            cmdline: vm.cmdline.clone(),
            net: vm.net.clone(),
            steps,
        });
    }
    let mut measurements = Vec::new();
    // Sequential measurements run one after another, in suite order.
    let mut previous = None;
    let nfs_read = s.nfs_read.as_ref().map(|n| {
        let (nfs, mut m) = crate::scenarios::nfs_read::expand(n, s, &mut vms, step_timeout);
        let ready = Dependency::step(&nfs.server, names::NFS_SERVER_READY);
        crate::measure::expand::expand(&mut m, &mut vms, &[ready], step_timeout, "nfs_read", &mut previous);
        measurements.push(m);
        nfs
    });
    for (i, spec) in s.measure.iter().enumerate() {
        let origin = format!("measure[{i}]");
        let mut m = crate::measure::compile(spec, s);
        let after = crate::measure::after_dependencies(spec, &measurements);
        if m.concurrent {
            let mut none = None;
            crate::measure::expand::expand(
                &mut m,
                &mut vms,
                &after,
                spec.timeout.unwrap_or(step_timeout),
                &origin,
                &mut none,
            );
        } else {
            crate::measure::expand::expand(
                &mut m,
                &mut vms,
                &after,
                spec.timeout.unwrap_or(step_timeout),
                &origin,
                &mut previous,
            );
        }
        measurements.push(m);
    }
    Ok(Plan {
        suite: s.name.clone(),
        suite_file: file.path.clone(),
        description: s.description.clone(),
        subnet: s.network.subnet,
        mtu: s.network.mtu.unwrap_or(DEFAULT_MTU),
        vms,
        measurements,
        nfs_read,
    })
}
