//! Rules of the `nfs_read:` block.

use std::collections::BTreeSet;

use super::spec::NfsReadSpec;
use crate::infra::images::Catalog;
use crate::suite::spec::SuiteSpec;
use crate::suite::validate::{limits, range, ValidationError};

/// Checks the `nfs_read:` block `n` of suite `s`.
pub fn check(errs: &mut Vec<ValidationError>, s: &SuiteSpec, n: &NfsReadSpec, catalog: &Catalog) {
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
        range(errs, "nfs_read.warmup", w, &limits::WARMUP, " reads");
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
