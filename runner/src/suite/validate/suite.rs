//! The rules of the suite's own keys (`name`, `network`, `defaults`, `vms` and each
//! VM's), calling each key's rules module; [`check`] runs every rule of the suite.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::time::Duration;

use super::rules::{duration, exit_status, is_name, is_step_name, range};
use super::{
    cmdline, env, files, guest, kernel, limits, measure, netem, nfs_read, packages, profile, sysctl, ValidationError,
};
use crate::infra::images::{Catalog, DEFAULT_ROOTFS};
use crate::plan::names;
use crate::schema::{SuiteFile, SuiteSpec, VmSpec};

/// The pattern of suite and VM names, as messages give it.
const NAME_PATTERN: &str = "lowercase letters, digits and '-', starting with a letter, at most 32 characters";

/// Checks every rule; returns all broken ones (empty = valid).
pub fn check(file: &SuiteFile, catalog: &Catalog) -> Vec<ValidationError> {
    let s = &file.spec;
    let mut errs = Vec::new();
    if !is_name(&s.name) {
        errs.push(ValidationError::BadName {
            key: "name".into(),
            what: "suite name",
            value: s.name.clone(),
            pattern: NAME_PATTERN,
        });
    }
    check_network(&mut errs, s);
    check_defaults(&mut errs, catalog, s);
    check_vms(&mut errs, file, catalog);
    if let Some(n) = &s.nfs_read {
        nfs_read::check(&mut errs, file, n, catalog);
    }
    measure::check(&mut errs, s);
    if let Some(v) = &s.verdict {
        super::rules::verdict_spec(&mut errs, "verdict", v);
    }
    errs
}

/// `network`: the MTU and the subnet.
fn check_network(errs: &mut Vec<ValidationError>, s: &SuiteSpec) {
    if let Some(mtu) = s.network.mtu {
        if !limits::MTU.contains(&mtu) {
            errs.push(ValidationError::OutOfRange {
                key: "network.mtu".into(),
                value: format!("{mtu} bytes"),
                range: format!(
                    "{} to {} bytes; a tap device takes at most {}",
                    limits::MTU.start(),
                    limits::MTU.end(),
                    limits::MTU.end()
                ),
            });
        }
    }
    if let Some(n) = s.network.capture_snaplen.filter(|n| !limits::CAPTURE_SNAPLEN.contains(n)) {
        errs.push(ValidationError::OutOfRange {
            key: "network.capture_snaplen".into(),
            value: format!("{n} bytes"),
            range: format!("{} to {} bytes", limits::CAPTURE_SNAPLEN.start(), limits::CAPTURE_SNAPLEN.end()),
        });
    }
    if let Some(n) = s.network.capture_max_bytes.filter(|n| !limits::CAPTURE_MAX_BYTES.contains(n)) {
        errs.push(ValidationError::OutOfRange {
            key: "network.capture_max_bytes".into(),
            value: format!("{n} bytes"),
            range: format!("{} to {} bytes", limits::CAPTURE_MAX_BYTES.start(), limits::CAPTURE_MAX_BYTES.end()),
        });
    }
    let subnet = s.network.subnet;
    if subnet.prefix_len() > 30 {
        errs.push(ValidationError::Rule {
            key: "network.subnet".into(),
            message: format!("subnet {subnet} is too small; use a /30 or larger"),
        });
    }
    if let Some(why) = unusable_subnet(subnet) {
        errs.push(ValidationError::Rule { key: "network.subnet".into(), message: why });
    }
}

/// `defaults`: the numbers, the step timeout and the rootfs.
fn check_defaults(errs: &mut Vec<ValidationError>, catalog: &Catalog, s: &SuiteSpec) {
    let d = &s.defaults;
    check_vm_numbers(errs, "defaults", d.memory, d.cpus, d.boot_timeout);
    if let Some(t) = d.step_timeout {
        duration(errs, "defaults.step_timeout", t);
    }
    if let Some(r) = &d.rootfs {
        rootfs_exists(errs, catalog, "defaults.rootfs", r);
    }
}

/// `vms`: how many, each one's unique name and address, then each VM's own keys.
fn check_vms(errs: &mut Vec<ValidationError>, file: &SuiteFile, catalog: &Catalog) {
    let s = &file.spec;
    if s.vms.is_empty() {
        errs.push(ValidationError::Rule { key: "vms".into(), message: "a suite needs at least one VM".into() });
    }
    if s.vms.len() > limits::VMS {
        errs.push(ValidationError::OutOfRange {
            key: "vms".into(),
            value: format!("{} VMs", s.vms.len()),
            range: format!("at most {}", limits::VMS),
        });
    }
    let subnet = s.network.subnet;
    let mut names: BTreeMap<&str, String> = BTreeMap::new();
    let mut addrs: BTreeMap<Ipv4Addr, String> = BTreeMap::new();
    for (i, vm) in s.vms.iter().enumerate() {
        let k = format!("vms[{i}]");
        if !is_name(&vm.name) {
            errs.push(ValidationError::BadName {
                key: format!("{k}.name"),
                what: "VM name",
                value: vm.name.clone(),
                pattern: NAME_PATTERN,
            });
        }
        if let Some(first) = names.insert(&vm.name, format!("{k}.name")) {
            errs.push(ValidationError::Duplicate {
                key: format!("{k}.name"),
                what: "VM name",
                value: vm.name.clone(),
                first,
            });
        }
        let a = vm.address;
        if !subnet.contains(&a) || a == subnet.network() || a == subnet.broadcast() {
            errs.push(ValidationError::AddressOutsideSubnet {
                key: format!("{k}.address"),
                address: a.to_string(),
                subnet: subnet.to_string(),
            });
        } else if let Some(first) = addrs.insert(a, format!("{k}.address")) {
            errs.push(ValidationError::Duplicate {
                key: format!("{k}.address"),
                what: "address",
                value: a.to_string(),
                first,
            });
        }
        check_vm(errs, file, catalog, vm, &k);
    }
}

/// One VM's keys (key path `k`), each by its rules module.
fn check_vm(errs: &mut Vec<ValidationError>, file: &SuiteFile, catalog: &Catalog, vm: &VmSpec, k: &str) {
    let s = &file.spec;
    check_vm_numbers(errs, k, vm.memory, vm.cpus, vm.boot_timeout);
    if let Some(r) = &vm.rootfs {
        rootfs_exists(errs, catalog, &format!("{k}.rootfs"), r);
    }
    profile::check(errs, catalog, s, vm, k);
    packages::check(errs, catalog, s, vm, k);
    sysctl::check(errs, vm, k);
    env::check(errs, vm, k);
    files::check(errs, file, vm, k);
    kernel::check_kernel(errs, file, catalog, &format!("{k}.kernel"), &vm.kernel);
    if let Some(line) = &vm.cmdline {
        let memory = vm.memory.or(s.defaults.memory).unwrap_or(crate::plan::DEFAULT_MEMORY_MIB);
        cmdline::check_cmdline(errs, &format!("{k}.cmdline"), line, memory);
    }
    if let Some(e) = vm.net.as_ref().and_then(|n| n.egress.as_ref()) {
        netem::check_netem(errs, &format!("{k}.net.egress"), e);
        for (n, to) in e.to.iter().enumerate() {
            if !s.vms.iter().any(|v| &v.name == to) {
                errs.push(ValidationError::Unknown {
                    key: format!("{k}.net.egress.to[{n}]"),
                    what: "VM",
                    value: to.clone(),
                    hint: String::new(),
                });
            } else if to == &vm.name {
                errs.push(ValidationError::Rule {
                    key: format!("{k}.net.egress.to[{n}]"),
                    message: "a VM can't send to itself over the bridge".into(),
                });
            }
        }
    }
    check_steps(errs, s, vm, k);
}

/// A VM's `steps`: names (valid, not the runner's, unique), commands, timeouts and
/// exit statuses.
fn check_steps(errs: &mut Vec<ValidationError>, s: &SuiteSpec, vm: &VmSpec, k: &str) {
    let mut step_names = BTreeSet::new();
    for (j, st) in vm.steps.iter().enumerate() {
        let sk = format!("{k}.steps[{j}]");
        if !is_step_name(&st.name) {
            errs.push(ValidationError::BadName {
                key: format!("{sk}.name"),
                what: "step name",
                value: st.name.clone(),
                pattern: "lowercase letters, digits, '-' and '_'",
            });
        }
        if let Some(why) = names::reserved(&st.name, crate::suite::compile::measure::measurement_names(s)) {
            errs.push(ValidationError::Rule {
                key: format!("{sk}.name"),
                message: format!("{why}; choose another step name"),
            });
        }
        if !step_names.insert(st.name.as_str()) {
            errs.push(ValidationError::Duplicate {
                key: format!("{sk}.name"),
                what: "step name",
                value: st.name.clone(),
                first: format!("{k}.steps"),
            });
        }
        guest::check_command(errs, &format!("{sk}.run"), &st.run);
        if let Some(t) = st.timeout {
            duration(errs, &format!("{sk}.timeout"), t);
        }
        if let Some(e) = st.expect_exit {
            exit_status(errs, &format!("{sk}.expect_exit"), e);
        }
    }
}

/// IPv4 ranges that can't carry the guests' traffic on their bridge, and why.
/// Judgement: link-local 169.254.0.0/16 stays allowed; Linux routes it like any other.
const UNUSABLE_RANGES: &[(&str, &str)] = &[
    ("0.0.0.0/8", "\"this network\" (0.0.0.0/8), which no host may use as its address"),
    ("127.0.0.0/8", "loopback (127.0.0.0/8): the kernel keeps these addresses on lo and drops them on a NIC"),
    ("224.0.0.0/4", "multicast (224.0.0.0/4): a group address can't be a host's address"),
    ("240.0.0.0/4", "reserved (240.0.0.0/4, with the broadcast address 255.255.255.255), refused by many tools"),
];

/// Why `subnet` can't be the suite's bridge, if it overlaps an unusable range.
fn unusable_subnet(subnet: ipnet::Ipv4Net) -> Option<String> {
    UNUSABLE_RANGES.iter().find_map(|(range, why)| {
        let r: ipnet::Ipv4Net = range.parse().expect("a valid range");
        (r.contains(&subnet.network()) || subnet.contains(&r.network())).then(|| {
            format!(
                "subnet {subnet} can't carry the guests' traffic: it is or overlaps {why}; use a private range (10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16)"
            )
        })
    })
}

/// The sizes and boot timeout of a VM or of `defaults` (key path `k`).
fn check_vm_numbers(
    errs: &mut Vec<ValidationError>,
    k: &str,
    memory: Option<u64>,
    cpus: Option<u32>,
    boot: Option<Duration>,
) {
    if let Some(m) = memory {
        range(errs, &format!("{k}.memory"), m, &limits::MEMORY_MIB, " MiB");
    }
    if let Some(c) = cpus {
        range(errs, &format!("{k}.cpus"), c, &limits::CPUS, " vCPUs");
    }
    if let Some(t) = boot {
        duration(errs, &format!("{k}.boot_timeout"), t);
    }
}

/// Whether rootfs recipe `name` (at `key`) is in the catalog.
fn rootfs_exists(errs: &mut Vec<ValidationError>, catalog: &Catalog, key: &str, name: &str) {
    if !catalog.rootfs.contains_key(name) {
        let known = catalog.rootfs.keys().cloned().collect::<Vec<_>>().join(", ");
        errs.push(ValidationError::Unknown {
            key: key.into(),
            what: "rootfs recipe",
            value: name.into(),
            hint: format!(" (known: {known}; default {DEFAULT_ROOTFS})"),
        });
    }
}
