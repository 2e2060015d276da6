//! Cross-field rules of a suite (spec → **validate** → plan).
//!
//! Deserialization already rejected unknown keys and wrong types; here we check what
//! the types can't express. Every rule yields a [`ValidationError`] naming the key path
//! it is about, so the error can show the line.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::images::{Catalog, DEFAULT_FLAVOUR, DEFAULT_ROOTFS};
use crate::plan;
use crate::spec::{SpecError, SuiteFile};

/// Limits on numeric settings: outside them the value is a mistake.
pub mod limits {
    use std::time::Duration;
    /// Guest memory, MiB.
    pub const MEMORY_MIB: std::ops::RangeInclusive<u64> = 128..=16384;
    /// vCPUs.
    pub const CPUS: std::ops::RangeInclusive<u32> = 1..=16;
    /// Any timeout.
    pub const TIMEOUT: std::ops::RangeInclusive<Duration> = Duration::from_secs(1)..=Duration::from_secs(24 * 3600);
    /// `nfs_read.repeat`.
    pub const REPEAT: std::ops::RangeInclusive<u32> = 1..=100;
    /// MTU, bytes.
    pub const MTU: std::ops::RangeInclusive<u32> = 576..=65535;
    /// Size of the measured file, bytes.
    pub const FILE_BYTES: u64 = 8 * 1024 * 1024 * 1024;
    /// VMs in one suite.
    pub const VMS: usize = 16;
}

/// One broken rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidationError {
    /// A name doesn't match its pattern.
    #[error("{what} {value:?} is not a valid name ({pattern})")]
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
    #[error("{what} {value:?} is used twice (first at {first})")]
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
    #[error("{what} {value:?} does not exist{hint}")]
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

fn is_name(s: &str) -> bool {
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
        range(&mut errs, "network.mtu", mtu, &limits::MTU, " bytes");
    }
    let subnet = s.network.subnet;
    if subnet.prefix_len() > 30 {
        errs.push(ValidationError::Rule {
            key: "network.subnet".into(),
            message: format!("subnet {subnet} is too small; use a /30 or larger"),
        });
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
    let mut steps_of: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
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
        if let Some(p) = &vm.profile {
            if !catalog.profiles.contains_key(p) {
                let known = catalog.profiles.keys().cloned().collect::<Vec<_>>().join(", ");
                errs.push(ValidationError::Unknown {
                    key: format!("{k}.profile"),
                    what: "profile",
                    value: p.clone(),
                    hint: format!(" (known: {known})"),
                });
            }
        }
        check_kernel(&mut errs, file, catalog, &format!("{k}.kernel"), &vm.kernel);
        if let Some(e) = vm.net.as_ref().and_then(|n| n.egress.as_ref()) {
            check_netem(&mut errs, &format!("{k}.net.egress"), e);
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
            if st.name == plan::NET_CONDITIONS_STEP
                || st.name == plan::NET_STATS_STEP
                || st.name.starts_with(plan::NET_RESEED_STEP_PREFIX)
            {
                errs.push(ValidationError::Rule {
                    key: format!("{sk}.name"),
                    message: format!(
                        "{:?} is reserved for the steps the runner adds ({}, {}*, {})",
                        st.name,
                        plan::NET_CONDITIONS_STEP,
                        plan::NET_RESEED_STEP_PREFIX,
                        plan::NET_STATS_STEP
                    ),
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
            if st.run.trim().is_empty() {
                errs.push(ValidationError::Rule { key: format!("{sk}.run"), message: "the command is empty".into() });
            }
            if let Some(t) = st.timeout {
                duration(&mut errs, &format!("{sk}.timeout"), t);
            }
        }
        steps_of.insert(&vm.name, step_names);
    }
    // `after` references, once all names are known.
    for (i, vm) in s.vms.iter().enumerate() {
        for (j, st) in vm.steps.iter().enumerate() {
            for (n, dep) in st.after.iter().enumerate() {
                let key = format!("vms[{i}].steps[{j}].after[{n}]");
                let (dvm, dstep) = match dep.split_once('/') {
                    Some((v, s)) => (v, Some(s)),
                    None => (dep.as_str(), None),
                };
                match steps_of.get(dvm) {
                    None => {
                        errs.push(ValidationError::Unknown { key, what: "VM", value: dvm.into(), hint: String::new() })
                    }
                    Some(steps) => {
                        if let Some(ds) = dstep {
                            if !(steps.contains(ds) || (nfs_step(ds) && s.nfs_read.is_some())) {
                                errs.push(ValidationError::Unknown {
                                    key,
                                    what: "step",
                                    value: dep.clone(),
                                    hint: String::new(),
                                });
                            } else if dvm == vm.name
                                && vm.steps.iter().position(|x| x.name == ds).is_none_or(|p| p >= j)
                            {
                                errs.push(ValidationError::Rule {
                                    key,
                                    message: format!(
                                        "step {:?} can only wait for earlier steps of its own VM",
                                        st.name
                                    ),
                                });
                            }
                        }
                    }
                }
            }
        }
    }
    if let Some(n) = &s.nfs_read {
        check_nfs(&mut errs, s, n, catalog);
    }
    errs
}

/// Step names the `nfs_read` scenario adds (others may wait for them).
fn nfs_step(s: &str) -> bool {
    s == crate::plan::NFS_SERVER_READY_STEP
}

fn check_nfs(
    errs: &mut Vec<ValidationError>,
    s: &crate::spec::SuiteSpec,
    n: &crate::spec::NfsReadSpec,
    catalog: &Catalog,
) {
    let vm = |name: &str| s.vms.iter().find(|v| v.name == name);
    match vm(&n.server) {
        None => errs.push(ValidationError::Unknown {
            key: "nfs_read.server".into(),
            what: "VM",
            value: n.server.clone(),
            hint: String::new(),
        }),
        Some(v) => {
            let exports = v.profile.as_deref().is_some_and(|p| p.starts_with("nfs-server"));
            if !exports {
                let known = catalog
                    .profiles
                    .keys()
                    .filter(|p| p.starts_with("nfs-server"))
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ");
                errs.push(ValidationError::Rule {
                    key: "nfs_read.server".into(),
                    message: format!(
                        "VM {:?} does not export anything: give it an NFS server profile (profile: one of {known})",
                        n.server
                    ),
                });
            }
        }
    }
    if !n.export.starts_with('/') || n.export.contains("..") {
        errs.push(ValidationError::Rule {
            key: "nfs_read.export".into(),
            message: format!("{:?} must be an absolute path without '..'", n.export),
        });
    }
    let f = &n.file;
    if f.name.is_empty()
        || f.name.starts_with('/')
        || f.name.split('/').any(|c| c == ".." || c.is_empty())
        || !f.name.chars().all(|c| c.is_ascii_alphanumeric() || "._-/".contains(c))
    {
        errs.push(ValidationError::Rule {
            key: "nfs_read.file.name".into(),
            message: format!("{:?} must be a relative path of letters, digits, '.', '_', '-' and '/'", f.name),
        });
    }
    if f.block_size == 0 || f.count == 0 || f.block_size.saturating_mul(f.count) > limits::FILE_BYTES {
        errs.push(ValidationError::OutOfRange {
            key: "nfs_read.file".into(),
            value: format!("block_size {} × count {}", f.block_size, f.count),
            range: format!("1 byte to {} bytes", limits::FILE_BYTES),
        });
    }
    if n.clients.is_empty() {
        errs.push(ValidationError::Rule {
            key: "nfs_read.clients".into(),
            message: "at least one client is needed".into(),
        });
    }
    let mut seen = BTreeSet::new();
    for (i, c) in n.clients.iter().enumerate() {
        let key = format!("nfs_read.clients[{i}]");
        if vm(c).is_none() {
            errs.push(ValidationError::Unknown { key, what: "VM", value: c.clone(), hint: String::new() });
        } else if *c == n.server {
            errs.push(ValidationError::Rule { key, message: "the server can't also be a client".into() });
        } else if !seen.insert(c) {
            errs.push(ValidationError::Duplicate {
                key,
                what: "client",
                value: c.clone(),
                first: "nfs_read.clients".into(),
            });
        }
    }
    if let Some(b) = &n.baseline {
        if !n.clients.contains(b) {
            errs.push(ValidationError::Unknown {
                key: "nfs_read.baseline".into(),
                what: "client",
                value: b.clone(),
                hint: " among nfs_read.clients".into(),
            });
        }
    }
    if let Some(w) = n.warmup {
        range(errs, "nfs_read.warmup", w, &(0..=10), " reads");
    }
    if let Some(r) = n.repeat {
        range(errs, "nfs_read.repeat", r, &limits::REPEAT, "");
    }
    for c in n.client_setup.keys() {
        if !n.clients.contains(c) {
            errs.push(ValidationError::Unknown {
                key: format!("nfs_read.client_setup.{c}"),
                what: "client",
                value: c.clone(),
                hint: String::new(),
            });
        }
    }
    if n.concurrent == Some(true) {
        for v in &s.vms {
            if v.net.as_ref().and_then(|x| x.egress.as_ref()).is_some_and(|e| e.seed.is_some()) {
                errs.push(ValidationError::Rule {
                    key: "nfs_read.concurrent".into(),
                    message: format!(
                        "VM {} has a seeded netem, which is reseeded before each read; \
                         concurrent reads would share one drop sequence in no fixed order",
                        v.name
                    ),
                });
            }
        }
    }
    if let Some(m) = &n.mount_point {
        if !m.starts_with('/')
            || m.contains("..")
            || m.contains(char::is_whitespace)
            || (m.len() > 1 && m.ends_with('/'))
        {
            errs.push(ValidationError::Rule {
                key: "nfs_read.mount_point".into(),
                message: format!("{m:?} must be an absolute path without '..', spaces or a trailing '/'"),
            });
        }
    }
    for (c, o) in &n.client_mount_options {
        let key = format!("nfs_read.client_mount_options.{c}");
        if !n.clients.contains(c) {
            errs.push(ValidationError::Unknown {
                key: key.clone(),
                what: "client",
                value: c.clone(),
                hint: String::new(),
            });
        }
        if o.is_empty() || !o.chars().all(|c| c.is_ascii_alphanumeric() || ",=._-".contains(c)) {
            errs.push(ValidationError::Rule {
                key,
                message: format!("{o:?} is not a mount option list (letters, digits, ',', '=', '.', '_', '-')"),
            });
        }
    }
    if let Some(o) = &n.mount_options {
        if o.is_empty() || !o.chars().all(|c| c.is_ascii_alphanumeric() || ",=._-".contains(c)) {
            errs.push(ValidationError::Rule {
                key: "nfs_read.mount_options".into(),
                message: format!("{o:?} is not a mount option list (letters, digits, ',', '=', '.', '_', '-')"),
            });
        }
    }
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
fn range<T: PartialOrd + std::fmt::Display>(
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

fn duration(errs: &mut Vec<ValidationError>, key: &str, t: Duration) {
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

fn check_kernel(
    errs: &mut Vec<ValidationError>,
    file: &SuiteFile,
    catalog: &Catalog,
    k: &str,
    spec: &crate::spec::KernelSpec,
) {
    if let Some(src) = &spec.source {
        if spec.debian.is_some() || spec.path.is_some() || spec.modules.is_some() || spec.flavour.is_some() {
            errs.push(ValidationError::Rule {
                key: k.into(),
                message: "give one of `debian`, `path` or `source`; `source` takes no `modules` or `flavour`".into(),
            });
            return;
        }
        if catalog.debian_source(&src.debian).is_none() {
            let known = catalog.sources.iter().map(|s| s.series.clone()).collect::<Vec<_>>().join(", ");
            errs.push(ValidationError::Unknown {
                key: format!("{k}.source.debian"),
                what: "Debian kernel source",
                value: src.debian.clone(),
                hint: format!(" in images/kernels.yaml (pinned sources: {known})"),
            });
        }
        for (what, files) in [("fragments", &src.fragments), ("patches", &src.patches)] {
            for (i, f) in files.iter().enumerate() {
                let full = file.resolve(f);
                if !full.is_file() {
                    errs.push(ValidationError::Rule {
                        key: format!("{k}.source.{what}[{i}]"),
                        message: format!(
                            "{} does not exist (relative paths start at the suite's folder)",
                            full.display()
                        ),
                    });
                }
            }
        }
        return;
    }
    match (&spec.debian, &spec.path) {
        (Some(series), None) => {
            let flavour = spec.flavour.as_deref().unwrap_or(DEFAULT_FLAVOUR);
            if catalog.debian_kernel(series, flavour).is_none() {
                let known = catalog.debian_series(flavour).join(", ");
                errs.push(ValidationError::Unknown {
                    key: format!("{k}.debian"),
                    what: "Debian kernel",
                    value: format!("{series} ({flavour})"),
                    hint: format!(" in images/kernels.yaml (pinned: {known})"),
                });
            }
            if spec.modules.is_some() {
                errs.push(ValidationError::Rule {
                    key: format!("{k}.modules"),
                    message: "`modules` goes with `path`; a Debian kernel brings its own".into(),
                });
            }
        }
        (None, Some(p)) => {
            let full = file.resolve(p);
            if !full.is_file() {
                errs.push(ValidationError::Rule {
                    key: format!("{k}.path"),
                    message: format!(
                        "kernel image {} does not exist (relative paths start at the suite's folder)",
                        full.display()
                    ),
                });
            }
            if let Some(m) = &spec.modules {
                let full = file.resolve(m);
                if !full.is_dir() {
                    errs.push(ValidationError::Rule {
                        key: format!("{k}.modules"),
                        message: format!("modules folder {} does not exist", full.display()),
                    });
                }
            }
            if spec.flavour.is_some() {
                errs.push(ValidationError::Rule {
                    key: format!("{k}.flavour"),
                    message: "`flavour` goes with `debian`".into(),
                });
            }
        }
        (Some(_), Some(_)) => errs
            .push(ValidationError::Rule { key: k.into(), message: "give either `debian` or `path`, not both".into() }),
        (None, None) => errs.push(ValidationError::Rule {
            key: k.into(),
            message:
                "give `debian: \"<series>\"` (e.g. \"6.1\"), `path: <bzImage>` or `source: {debian: \"<series>\"}`"
                    .into(),
        }),
    }
}

/// Runs [`check`] and turns broken rules into a located [`SpecError`].
pub fn validate(file: &SuiteFile, catalog: &Catalog) -> Result<(), SpecError> {
    let errs = check(file, catalog);
    if errs.is_empty() {
        return Ok(());
    }
    Err(SpecError::Invalid(errs.iter().map(|e| file.error_at(e.key(), e.to_string())).collect()))
}

fn is_percent(v: &str) -> bool {
    v.strip_suffix('%').and_then(|n| n.parse::<f64>().ok()).is_some_and(|n| (0.0..=100.0).contains(&n))
}

fn is_tc_time(v: &str) -> bool {
    let num = v.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &v[num.len()..];
    num.parse::<f64>().is_ok_and(|n| n >= 0.0) && matches!(unit, "us" | "ms" | "s")
}

fn is_tc_rate(v: &str) -> bool {
    let num = v.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &v[num.len()..];
    num.parse::<f64>().is_ok_and(|n| n > 0.0) && matches!(unit, "bit" | "kbit" | "mbit" | "gbit")
}

fn check_netem(errs: &mut Vec<ValidationError>, k: &str, e: &crate::spec::NetemSpec) {
    let mut bad = |field: &str, v: &str, what: &str| {
        errs.push(ValidationError::Rule { key: format!("{k}.{field}"), message: format!("{v:?} is not {what}") })
    };
    for (field, v) in [("loss", &e.loss), ("reorder", &e.reorder), ("duplicate", &e.duplicate)] {
        if let Some(v) = v {
            if !is_percent(v) {
                bad(field, v, "a percentage between 0% and 100% (e.g. \"1%\")");
            }
        }
    }
    for (field, v) in [("delay", &e.delay), ("jitter", &e.jitter)] {
        if let Some(v) = v {
            if !is_tc_time(v) {
                bad(field, v, "a time with a unit us, ms or s (e.g. \"5ms\")");
            }
        }
    }
    if let Some(v) = &e.rate {
        if !is_tc_rate(v) {
            bad("rate", v, "a rate with a unit bit, kbit, mbit or gbit (e.g. \"100mbit\")");
        }
    }
    if e.reorder.is_some() && e.delay.is_none() {
        errs.push(ValidationError::Rule {
            key: format!("{k}.reorder"),
            message: "netem reorders only delayed packets: give `delay` too".into(),
        });
    }
    if e.seed.is_some() && e.loss.is_none() && e.reorder.is_none() && e.duplicate.is_none() && e.jitter.is_none() {
        errs.push(ValidationError::Rule {
            key: format!("{k}.seed"),
            message: "`seed` seeds netem's random loss, reordering, duplication or jitter: give one of them".into(),
        });
    }
    if e.jitter.is_some() && e.delay.is_none() {
        errs.push(ValidationError::Rule { key: format!("{k}.jitter"), message: "`jitter` needs `delay`".into() });
    }
}
