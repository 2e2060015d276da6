//! What the published report shows of an `nfs_read` run beyond its table: the
//! server and the clients' mounts, the mount differences between two clients, and the
//! report-layout raw files (see [`crate::scenarios::Preset`]).

use crate::path_io::{FileError, Folder, PathIo, MAX_OUTPUT_BYTES};
use std::path::Path;

use super::results::NfsResults;
use crate::parse::procmounts::MountInfo;
use crate::plan::nfs_read::NfsPlan;
use crate::scenarios::preset::{PresetSection, RawOutput};

/// The "NFS mounts" section: the server's profile, each client's negotiated mount, the
/// file read and the notes.
pub(crate) fn mounts_section(plan: Option<&NfsPlan>, n: &NfsResults) -> PresetSection {
    let mut t = String::new();
    t.push_str(&format!("server {} ({})\n", n.server.vm, n.server.kernel_release));
    for (k, v) in &n.server.profile {
        t.push_str(&format!("  {k}: {v}\n"));
    }
    for c in &n.clients {
        let m = &c.mount;
        t.push_str(&format!(
            "{}: vers={} proto={} rsize={} wsize={} read_ahead_kb={}\n  {}\n",
            c.vm,
            m.nfs_version.as_deref().unwrap_or("?"),
            m.transport.as_deref().unwrap_or("?"),
            m.rsize.map_or("?".into(), |x| x.to_string()),
            m.wsize.map_or("?".into(), |x| x.to_string()),
            m.read_ahead_kb.map_or("?".into(), |x| x.to_string()),
            m.options
        ));
    }
    let mut paragraphs = Vec::new();
    if let Some(p) = plan {
        paragraphs.push(format!(
            "File {} ({} bytes) on the server's export {}, read with `cat` on a fresh mount with dropped caches each time; mount options asked for: {}.",
            p.file_name, p.file_bytes, p.export, p.mount_options
        ));
    }
    for c in n.clients.iter().filter(|c| !c.negotiated_otherwise.is_empty()) {
        paragraphs.push(format!("Negotiated otherwise than asked on {}: {}.", c.vm, c.negotiated_otherwise.join("; ")));
    }
    paragraphs.extend(n.notes.iter().map(|note| format!("Note: {note}")));
    PresetSection { title: "NFS mounts".into(), table: t, paragraphs }
}

/// The mount options asked for and negotiated, where clients `base` and `cand` differ.
pub(crate) fn differences(plan: Option<&NfsPlan>, n: &NfsResults, base: &str, cand: &str) -> Vec<String> {
    let mut d = Vec::new();
    if let Some(p) = plan {
        let (x, y) = (p.mount_options_of(base), p.mount_options_of(cand));
        if x != y {
            d.push(format!("mount options: {base} {x}, {cand} {y}"));
        }
    }
    let opts = |vm: &str| n.clients.iter().find(|c| c.vm == vm).map(|c| c.mount.options.clone());
    if let (Some(p), Some(q)) = (opts(base), opts(cand)) {
        let (p, q) = option_difference(&p, &q);
        if !p.is_empty() || !q.is_empty() {
            d.push(format!("negotiated mount options: {base} {p}, {cand} {q}"));
        }
    }
    d
}

/// The options asked for in `asked` (`mount -o`, e.g. `vers=4.1,rsize=1048576`) that
/// the mount `got` (its `/proc/mounts` options) negotiated otherwise, each as `rsize
/// 1048576 asked, 65536 negotiated`: `rsize`, `wsize`, `vers` (also `nfsvers`; `vers=4`
/// is any 4.x) and the transport (`proto=`, `udp`, `tcp`). Options not asked for, and
/// mounts whose options were not recorded, give none.
pub fn negotiated_otherwise(asked: &str, got: &MountInfo) -> Vec<String> {
    if got.options.is_empty() {
        return Vec::new();
    }
    let get = |keys: &[&str]| {
        asked.split(',').rev().find_map(|o| keys.iter().find_map(|k| o.trim().strip_prefix(k).map(str::to_string)))
    };
    let mut out = Vec::new();
    let mut differs = |what: &str, asked: Option<String>, got: Option<String>, same: &dyn Fn(&str, &str) -> bool| {
        if let Some(a) = asked {
            let g = got.unwrap_or_else(|| "not shown".into());
            if !same(&a, &g) {
                out.push(format!("{what} {a} asked, {g} negotiated"));
            }
        }
    };
    let eq = |a: &str, g: &str| a == g;
    differs("rsize", get(&["rsize="]), got.rsize.map(|x| x.to_string()), &eq);
    differs("wsize", get(&["wsize="]), got.wsize.map(|x| x.to_string()), &eq);
    let vers = |a: &str, g: &str| a == g || (!a.contains('.') && g.split('.').next() == Some(a));
    differs("vers", get(&["vers=", "nfsvers="]), got.nfs_version.clone(), &vers);
    let proto = asked.split(',').rev().find_map(|o| match o.trim() {
        "udp" | "tcp" => Some(o.trim().to_string()),
        o => o.strip_prefix("proto=").map(str::to_string),
    });
    differs("proto", proto, got.transport.clone(), &eq);
    out
}

/// `nfs/<vm>/read-<N>.txt` of measurement `name`, when the run folder `dir` has it.
pub(crate) fn raw_output(dir: &Path, name: &str, vm: &str, iteration: u32) -> Option<RawOutput> {
    let file = format!("nfs/{vm}/read-{iteration}.txt");
    // Through the confined layer: the run folder is untrusted (no link followed, no
    // FIFO opened, the size capped; see SECURITY.md).
    // One read: a file that isn't there is no raw output; one that can't be shown says why.
    let text = match Folder::open(dir).ok()?.read_text(&file, MAX_OUTPUT_BYTES) {
        Ok(text) => text,
        Err(FileError::Io(PathIo { source, .. })) if source.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => format!("(not shown: {e})"),
    };
    Some(RawOutput {
        caption: format!(
            "{vm}, {name} repeat {iteration} ({file}): uname -r, GNU time, netstat -s and nfsstat after the read"
        ),
        text,
    })
}

/// The options of two mount option lists that are not in both, each side's in its
/// order, without the ones that differ from mount to mount (`mountport=`).
pub fn option_difference(a: &str, b: &str) -> (String, String) {
    let keep = |o: &&str| !o.starts_with("mountport=");
    let only = |x: &str, y: &str| {
        x.split(',').filter(keep).filter(|o| !y.split(',').any(|p| p == *o)).collect::<Vec<_>>().join(",")
    };
    (only(a, b), only(b, a))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::procmounts::mount_info;

    #[test]
    fn options_negotiated_otherwise_than_asked() {
        let got = mount_info("s:/e /mnt nfs4 rw,vers=4.1,rsize=65536,wsize=1048576,proto=tcp,timeo=600 0 0", None);
        assert_eq!(
            negotiated_otherwise("vers=4.1,rsize=1048576,wsize=1048576,udp", &got),
            ["rsize 1048576 asked, 65536 negotiated", "proto udp asked, tcp negotiated"]
        );
        assert_eq!(negotiated_otherwise("nfsvers=4,proto=tcp", &got), Vec::<String>::new(), "vers=4 is any 4.x");
        assert_eq!(negotiated_otherwise("vers=4.2", &got), ["vers 4.2 asked, 4.1 negotiated"]);
        assert_eq!(negotiated_otherwise("defaults", &got), Vec::<String>::new());
        assert_eq!(negotiated_otherwise("rsize=8192", &MountInfo::default()), Vec::<String>::new(), "not recorded");
    }

    #[test]
    fn mount_option_difference_leaves_out_what_both_have() {
        let (a, b) = option_difference(
            "rw,vers=3,proto=udp,timeo=11,mountport=58006,addr=10.82.0.1",
            "rw,vers=3,proto=tcp,timeo=600,mountport=46089,addr=10.82.0.1",
        );
        assert_eq!((a.as_str(), b.as_str()), ("proto=udp,timeo=11", "proto=tcp,timeo=600"));
    }
}
