//! Cross-field rules of a suite (spec → **validate** → plan).
//!
//! Deserialization already rejected unknown keys and wrong types; here we check what
//! the types can't express. Every rule yields a [`ValidationError`] naming the key path
//! it is about, so the error can show the line.

pub mod extras;
pub use extras::parse_mode;
mod graph;
pub mod guest;
mod kernel;
mod measure;
mod netem;
pub mod nfs_read;
mod profile;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::infra::images::{Catalog, PinnedKernel, PinnedSource, DEFAULT_ROOTFS};
use crate::plan::{names, Plan};
use crate::schema::text::{non_ascii_hint, shown};
use crate::schema::{SpecError, SuiteFile};
pub use graph::check_graph;

/// Limits on numeric settings: outside them the value is a mistake.
pub mod limits {
    use std::time::Duration;
    /// Guest memory, MiB.
    pub const MEMORY_MIB: std::ops::RangeInclusive<u64> = 128..=16384;
    /// vCPUs.
    pub const CPUS: std::ops::RangeInclusive<u32> = 1..=16;
    /// Any timeout.
    pub const TIMEOUT: std::ops::RangeInclusive<Duration> = Duration::from_secs(1)..=Duration::from_secs(24 * 3600);
    /// Measured iterations per VM (`repeat`).
    pub const REPEAT: std::ops::RangeInclusive<u32> = 1..=100;
    /// Warm-up iterations per VM (`warmup`).
    pub const WARMUP: std::ops::RangeInclusive<u32> = 0..=10;
    /// Exit statuses (`expect_exit`).
    pub const EXIT_STATUS: std::ops::RangeInclusive<i32> = 0..=255;
    /// MTU, bytes. The top is a tap device's largest MTU (65535 less its 14-byte
    /// Ethernet header): the runner could not set more on the VMs' taps.
    pub const MTU: std::ops::RangeInclusive<u32> = 576..=65521;
    /// Size of the measured file, bytes.
    pub const FILE_BYTES: u64 = 8 * 1024 * 1024 * 1024;
    /// Read-ahead of an NFS mount, KiB (1 GiB; more than any guest's memory would use).
    pub const READ_AHEAD_KB: u32 = 1024 * 1024;
    /// Bytes one iteration of a measurement moves (`bytes`): 1 PiB, far more than a
    /// guest moves in a step's 24 h.
    pub const MEASURE_BYTES: std::ops::RangeInclusive<u64> = 1..=(1 << 50);
    /// VMs in one suite.
    pub const VMS: usize = 16;
}

/// One broken rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidationError {
    /// A name doesn't match its pattern.
    #[error("{what} {} is not a valid name ({pattern}){}", shown(.value, 80), non_ascii_hint(.value))]
    BadName {
        /// Key path.
        key: String,
        /// Which kind of name.
        what: &'static str,
        /// The value.
        value: String,
        /// Allowed pattern.
        pattern: &'static str,
    },
    /// Two things share a name that must be unique.
    #[error("{what} {} is used twice (first at {first})", shown(.value, 80))]
    Duplicate {
        /// Key path of the second use.
        key: String,
        /// Which kind of name.
        what: &'static str,
        /// The value.
        value: String,
        /// Key path of the first use.
        first: String,
    },
    /// A number or duration outside its limits.
    #[error("{value} is out of range (allowed: {range})")]
    OutOfRange {
        /// Key path.
        key: String,
        /// The value as written.
        value: String,
        /// Allowed range.
        range: String,
    },
    /// An address outside the subnet, or the subnet's network/broadcast address.
    #[error("{address} is not a usable host address of the suite's subnet {subnet}")]
    AddressOutsideSubnet {
        /// Key path.
        key: String,
        /// The address.
        address: String,
        /// The subnet.
        subnet: String,
    },
    /// A reference to something that doesn't exist.
    #[error("{what} {} does not exist{hint}{}", shown(.value, 80), non_ascii_hint(.value))]
    Unknown {
        /// Key path.
        key: String,
        /// What was referenced.
        what: &'static str,
        /// The reference.
        value: String,
        /// Extra help (", known: …").
        hint: String,
    },
    /// Any other rule.
    #[error("{message}")]
    Rule {
        /// Key path.
        key: String,
        /// What is wrong.
        message: String,
    },
}

impl ValidationError {
    /// The key path the error is about.
    pub fn key(&self) -> &str {
        match self {
            ValidationError::BadName { key, .. }
            | ValidationError::Duplicate { key, .. }
            | ValidationError::OutOfRange { key, .. }
            | ValidationError::AddressOutsideSubnet { key, .. }
            | ValidationError::Unknown { key, .. }
            | ValidationError::Rule { key, .. } => key,
        }
    }
}

pub(crate) fn is_name(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some('a'..='z'))
        && c.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && s.len() <= 32
}

fn is_step_name(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some('a'..='z' | '0'..='9'))
        && c.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        && s.len() <= 48
}

/// Checks every rule; returns all broken ones (empty = valid).
pub fn check(file: &SuiteFile, catalog: &Catalog) -> Vec<ValidationError> {
    let s = &file.spec;
    let mut errs = Vec::new();
    let name_pat = "lowercase letters, digits and '-', starting with a letter, at most 32 characters";
    if !is_name(&s.name) {
        errs.push(ValidationError::BadName {
            key: "name".into(),
            what: "suite name",
            value: s.name.clone(),
            pattern: name_pat,
        });
    }
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
    let d = &s.defaults;
    check_vm_numbers(&mut errs, "defaults", d.memory, d.cpus, d.boot_timeout);
    if let Some(t) = d.step_timeout {
        duration(&mut errs, "defaults.step_timeout", t);
    }
    if let Some(r) = &d.rootfs {
        rootfs_exists(&mut errs, catalog, "defaults.rootfs", r);
    }

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
    let mut names: BTreeMap<&str, String> = BTreeMap::new();
    let mut addrs: BTreeMap<std::net::Ipv4Addr, String> = BTreeMap::new();
    for (i, vm) in s.vms.iter().enumerate() {
        let k = format!("vms[{i}]");
        if !is_name(&vm.name) {
            errs.push(ValidationError::BadName {
                key: format!("{k}.name"),
                what: "VM name",
                value: vm.name.clone(),
                pattern: name_pat,
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
        check_vm_numbers(&mut errs, &k, vm.memory, vm.cpus, vm.boot_timeout);
        if let Some(r) = &vm.rootfs {
            rootfs_exists(&mut errs, catalog, &format!("{k}.rootfs"), r);
        }
        profile::check(&mut errs, catalog, s, vm, &k);
        extras::check(&mut errs, file, catalog, s, vm, &k);
        kernel::check_kernel(&mut errs, file, catalog, &format!("{k}.kernel"), &vm.kernel);
        if let Some(line) = &vm.cmdline {
            kernel::check_cmdline(&mut errs, &format!("{k}.cmdline"), line);
        }
        if let Some(e) = vm.net.as_ref().and_then(|n| n.egress.as_ref()) {
            netem::check_netem(&mut errs, &format!("{k}.net.egress"), e);
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
            guest::check_command(&mut errs, &format!("{sk}.run"), &st.run);
            if let Some(t) = st.timeout {
                duration(&mut errs, &format!("{sk}.timeout"), t);
            }
            if let Some(e) = st.expect_exit {
                exit_status(&mut errs, &format!("{sk}.expect_exit"), e);
            }
        }
    }
    if let Some(n) = &s.nfs_read {
        crate::suite::validate::nfs_read::check(&mut errs, s, n, catalog);
    }
    measure::check(&mut errs, s);
    errs
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

/// Checks `v` against `r`; `unit` (e.g. `" MiB"`) follows the numbers in the message.
pub(crate) fn range<T: PartialOrd + std::fmt::Display>(
    errs: &mut Vec<ValidationError>,
    key: &str,
    v: T,
    r: &std::ops::RangeInclusive<T>,
    unit: &str,
) {
    if !r.contains(&v) {
        errs.push(ValidationError::OutOfRange {
            key: key.into(),
            value: format!("{v}{unit}"),
            range: format!("{} to {}{unit}", r.start(), r.end()),
        });
    }
}

/// Checks an expected exit status: a process's status is one byte.
/// Checks a per-VM map of snapshot verdict overrides at `key` (`key.<vm>` per entry):
/// every VM must be one of `compared` (the measured VMs, in order) and not the
/// baseline (`baseline`, else the first of `compared`), which has no verdict.
pub(crate) fn verdict_overrides<V>(
    errs: &mut Vec<ValidationError>,
    key: &str,
    overrides: &std::collections::BTreeMap<String, V>,
    compared: &[String],
    baseline: Option<&str>,
) {
    let baseline = baseline.or(compared.first().map(String::as_str));
    for vm in overrides.keys() {
        let key = format!("{key}.{vm}");
        if !compared.contains(vm) {
            errs.push(ValidationError::Rule {
                key,
                message: format!(
                    "{} is not one of the compared VMs ({}){}",
                    crate::schema::text::shown(vm, 80),
                    compared.join(", "),
                    crate::schema::text::non_ascii_hint(vm)
                ),
            });
        } else if Some(vm.as_str()) == baseline {
            errs.push(ValidationError::Rule {
                key,
                message: format!(
                    "{} is the baseline, which has no verdict of its own; name a VM compared with it",
                    crate::schema::text::shown(vm, 80)
                ),
            });
        }
    }
}

pub(crate) fn exit_status(errs: &mut Vec<ValidationError>, key: &str, e: i32) {
    if !limits::EXIT_STATUS.contains(&e) {
        errs.push(ValidationError::OutOfRange {
            key: key.into(),
            value: e.to_string(),
            range: "0 to 255; an exit status is one byte, and a command killed by signal N exits 128+N".into(),
        });
    }
}

pub(crate) fn duration(errs: &mut Vec<ValidationError>, key: &str, t: Duration) {
    if !limits::TIMEOUT.contains(&t) {
        errs.push(ValidationError::OutOfRange {
            key: key.into(),
            value: format_duration(t),
            range: "1s to 24h".into(),
        });
    }
}

/// A duration as a user would write it: whole days, hours or minutes when exact
/// (`1000d`, not humantime's `2years 8months 25days 23h 31m 12s`).
fn format_duration(t: Duration) -> String {
    let s = t.as_secs();
    if t.subsec_nanos() != 0 || s == 0 {
        return humantime::format_duration(t).to_string();
    }
    for (unit, secs) in [("d", 86400), ("h", 3600), ("m", 60)] {
        if s % secs == 0 {
            return format!("{}{unit}", s / secs);
        }
    }
    format!("{s}s")
}

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

/// A suite that passed [`validate`]: the only way to [`crate::suite::compile::compile`] one.
#[derive(Debug)]
pub struct Validated<'a> {
    /// The suite with its VMs' variants expanded (what is compiled).
    file: SuiteFile,
    /// Where the expanded suite's keys come from in the file as written.
    map: crate::suite::variants::KeyMap,
    catalog: &'a Catalog,
}

impl<'a> Validated<'a> {
    /// The suite, its VMs' variants expanded into plain VMs (see
    /// [`crate::suite::variants`]).
    pub fn file(&self) -> &SuiteFile {
        &self.file
    }

    /// The pinned Debian kernel a VM names (validated to exist).
    pub fn debian_kernel(&self, series: &str, flavour: &str) -> &'a PinnedKernel {
        self.catalog.debian_kernel(series, flavour).expect("validated: the kernel is pinned")
    }

    /// The pinned kernel source package a VM names (validated to exist).
    pub fn source_kernel(&self, series: &str) -> &'a PinnedSource {
        self.catalog.debian_source(series).expect("validated: the source is pinned")
    }
}

/// Expands the VMs' variants ([`crate::suite::variants`]) and runs [`check`] on the
/// plain suite that results; broken rules become one located [`SpecError`], pointing
/// into the file as written.
pub fn validate<'a>(file: &SuiteFile, catalog: &'a Catalog) -> Result<Validated<'a>, SpecError> {
    let (expanded, map) = match crate::suite::variants::expand(&file.spec) {
        Ok(x) => x,
        Err(errs) => {
            located(file, errs, None)?;
            unreachable!("expand returns errors only with some")
        }
    };
    let expanded = file.with_spec(expanded);
    located(file, check(&expanded, catalog), Some(&map))?;
    Ok(Validated { file: expanded, map, catalog })
}

/// Checks what only the compiled plan shows: every `after` target exists, no wait can
/// never end (see [`check_graph`]), and every generated script fits in one exec
/// argument ([`guest::check_plan_scripts`]). `file` is the suite as written.
pub fn validate_plan(file: &SuiteFile, valid: &Validated<'_>, plan: &Plan) -> Result<(), SpecError> {
    let mut errs = check_graph(&valid.file.spec, plan);
    errs.extend(guest::check_plan_scripts(plan));
    located(file, errs, Some(&valid.map))
}

fn located(
    file: &SuiteFile,
    errs: Vec<ValidationError>,
    map: Option<&crate::suite::variants::KeyMap>,
) -> Result<(), SpecError> {
    if errs.is_empty() {
        return Ok(());
    }
    // A problem of a VM with variants is found once per variant, at the same place of
    // the file with the same words: it is shown once.
    let mut seen = std::collections::HashSet::new();
    let unique: Vec<(String, String)> = errs
        .iter()
        .map(|e| (map.map_or_else(|| e.key().to_string(), |m| m.remap(e.key())), e.to_string()))
        .filter(|p| seen.insert(p.clone()))
        .collect();
    // Only the problems shown are located (locating one reads the text up to its line).
    let shown = unique.iter().take(crate::schema::load::MAX_PROBLEMS + 1);
    let problems = shown.map(|(key, message)| file.error_at(key, message.clone())).collect();
    Err(SpecError::Invalid(crate::schema::load::capped(problems, unique.len())))
}
