//! [`compile`]: a validated suite → its [`Plan`].

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use super::measure::compile_measurements;
use super::vm::{compile_vm, Timeouts};
use crate::infra::images::Catalog;
use crate::plan::{Plan, DEFAULT_MTU, DEFAULT_STEP_TIMEOUT};
use crate::schema::SpecError;
use crate::suite::validate::Validated;

/// Compiles a validated suite.
///
/// Errors: [`SpecError::Read`] when a file a VM copies in or a profile script can't be
/// read.
pub fn compile(v: &Validated<'_>, catalog: &Catalog) -> Result<Plan, SpecError> {
    let file = v.file();
    let s = &file.spec;
    let step_timeout = s.defaults.step_timeout.unwrap_or(DEFAULT_STEP_TIMEOUT);
    let timeouts = Timeouts { step: step_timeout, setup: step_timeout.max(DEFAULT_STEP_TIMEOUT) };
    let addresses: BTreeMap<String, Ipv4Addr> = s.vms.iter().map(|v| (v.name.clone(), v.address)).collect();
    let mut vms = Vec::new();
    for (i, vm) in s.vms.iter().enumerate() {
        vms.push(compile_vm(v, catalog, i, vm, &addresses, timeouts)?);
    }
    let (nfs_read, measurements) = compile_measurements(s, &mut vms, step_timeout);
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
