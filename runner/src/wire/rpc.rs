//! ONC RPC message headers (RFC 5531), decoded by hand from the first bytes of a
//! UDP datagram's payload or of a TCP record: XID, call or reply, and for a call the
//! program, version and procedure, with the names of NFSv3's procedures (RFC 1813)
//! and of NFSv4's COMPOUND operations (RFC 7530, RFC 8881).
//!
//! Works on truncated data (captures keep the first `capture_snaplen` bytes of each
//! frame): a call needs its 40-byte fixed header plus the credential and verifier;
//! COMPOUND operation names are decoded as far as the captured bytes reach.

/// The ONC RPC program number of NFS.
pub const NFS_PROGRAM: u32 = 100003;
/// The ONC RPC program number of MOUNT.
pub const MOUNT_PROGRAM: u32 = 100005;

/// One decoded RPC message header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcMessage {
    /// Transaction id, as sent (the same for every retransmission of a call).
    pub xid: u32,
    /// Call or reply.
    pub body: RpcBody,
}

/// The part of an RPC header after the XID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RpcBody {
    /// `msg_type` CALL (0).
    Call(RpcCall),
    /// `msg_type` REPLY (1): accepted (`MSG_ACCEPTED`) or denied.
    Reply {
        /// `reply_stat` is `MSG_ACCEPTED` (0).
        accepted: bool,
    },
}

/// A call's program, version and procedure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcCall {
    /// Program number (100003 NFS, 100005 MOUNT, …).
    pub program: u32,
    /// Program version.
    pub version: u32,
    /// Procedure number.
    pub procedure: u32,
    /// For an NFSv4 COMPOUND: the operation names decoded from the captured bytes, in
    /// order (empty otherwise; may stop short of the whole list in a truncated capture).
    pub ops: Vec<&'static str>,
}

impl RpcCall {
    /// A short name: `NFSv3 READ`, `NFSv4 COMPOUND(SEQUENCE,PUTFH,READ)`, `MOUNTv3 MNT`,
    /// or `prog 100021 v4 proc 7` for what this module does not name.
    pub fn name(&self) -> String {
        let prog = match self.program {
            NFS_PROGRAM => "NFS",
            MOUNT_PROGRAM => "MOUNT",
            100000 => "PORTMAP",
            100021 => "NLM",
            100024 => "STATUS",
            100227 => "NFS_ACL",
            p => return format!("prog {p} v{} proc {}", self.version, self.procedure),
        };
        let proc_name = procedure_name(self.program, self.version, self.procedure);
        match proc_name {
            Some("COMPOUND") if !self.ops.is_empty() => {
                format!("{prog}v{} COMPOUND({})", self.version, self.ops.join(","))
            }
            Some(n) => format!("{prog}v{} {n}", self.version),
            None => format!("{prog}v{} proc {}", self.version, self.procedure),
        }
    }
}

/// Why bytes are not an RPC message header.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RpcError {
    /// Fewer bytes than the header needs (`needed` bytes).
    #[error("truncated RPC header: {have} bytes, {needed} needed")]
    Truncated {
        /// Bytes there.
        have: usize,
        /// Bytes needed.
        needed: usize,
    },
    /// `msg_type` is neither 0 nor 1.
    #[error("msg_type {0} is neither CALL (0) nor REPLY (1)")]
    MessageType(u32),
    /// A call's `rpcvers` is not 2.
    #[error("rpcvers {0}, not 2")]
    RpcVersion(u32),
    /// An `opaque_auth` body longer than RFC 5531's 400 bytes.
    #[error("authentication body of {0} bytes (at most 400)")]
    AuthLength(u32),
}

/// A big-endian XDR cursor over possibly truncated bytes.
struct Xdr<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Xdr<'a> {
    fn u32(&mut self) -> Result<u32, RpcError> {
        let end = self.at + 4;
        let b = self.data.get(self.at..end).ok_or(RpcError::Truncated { have: self.data.len(), needed: end })?;
        self.at = end;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Skips `n` bytes rounded up to XDR's 4-byte units.
    fn skip(&mut self, n: usize) -> Result<(), RpcError> {
        let end = self.at + n.div_ceil(4) * 4;
        if end > self.data.len() {
            return Err(RpcError::Truncated { have: self.data.len(), needed: end });
        }
        self.at = end;
        Ok(())
    }

    /// Skips a variable-length opaque or string of at most `max` bytes (`None`: any).
    fn skip_opaque(&mut self, max: Option<u32>) -> Result<(), RpcError> {
        let len = self.u32()?;
        if max.is_some_and(|m| len > m) {
            return Err(RpcError::AuthLength(len));
        }
        self.skip(len as usize)
    }
}

/// Decodes the RPC message header at the start of `data` (a UDP payload, or a TCP
/// record after its 4-byte record mark).
///
/// A reply needs 12 bytes (XID, `msg_type`, `reply_stat`); a call 24 bytes plus its
/// credential and verifier. Errors: [`RpcError`] for bytes that are not an RPC header
/// or are cut before its fixed part.
pub fn decode(data: &[u8]) -> Result<RpcMessage, RpcError> {
    let mut x = Xdr { data, at: 0 };
    let xid = x.u32()?;
    match x.u32()? {
        0 => {
            let rpcvers = x.u32()?;
            if rpcvers != 2 {
                return Err(RpcError::RpcVersion(rpcvers));
            }
            let (program, version, procedure) = (x.u32()?, x.u32()?, x.u32()?);
            let mut ops = Vec::new();
            // cred and verf: flavor + opaque<400>. Cut here, the call is still named.
            let auth = (|| -> Result<(), RpcError> {
                for _ in 0..2 {
                    x.u32()?;
                    x.skip_opaque(Some(400))?;
                }
                Ok(())
            })();
            if auth.is_ok() && program == NFS_PROGRAM && version == 4 && procedure == 1 {
                compound_ops(&mut x, &mut ops);
            }
            if let Err(RpcError::AuthLength(n)) = auth {
                return Err(RpcError::AuthLength(n));
            }
            Ok(RpcMessage { xid, body: RpcBody::Call(RpcCall { program, version, procedure, ops }) })
        }
        1 => Ok(RpcMessage { xid, body: RpcBody::Reply { accepted: x.u32()? == 0 } }),
        t => Err(RpcError::MessageType(t)),
    }
}

/// Reads COMPOUND4args (tag, minorversion, argarray) into `ops` as far as the captured
/// bytes and the operations whose arguments this decoder knows how to skip reach.
fn compound_ops(x: &mut Xdr<'_>, ops: &mut Vec<&'static str>) {
    let head = (|| -> Result<u32, RpcError> {
        x.skip_opaque(Some(1024))?;
        x.u32()?;
        x.u32()
    })();
    let Ok(count) = head else { return };
    for _ in 0..count.min(64) {
        let Ok(op) = x.u32() else { return };
        let Some(name) = nfs4_op_name(op) else { return };
        ops.push(name);
        if skip_op_args(x, op).is_err() {
            return;
        }
    }
}

/// Skips the arguments of NFSv4 operation `op`; an error for an operation whose
/// arguments this decoder does not walk (the list stops there).
fn skip_op_args(x: &mut Xdr<'_>, op: u32) -> Result<(), RpcError> {
    let bitmap = |x: &mut Xdr<'_>| -> Result<(), RpcError> {
        let words = x.u32()?;
        x.skip(words as usize * 4)
    };
    match op {
        // GETFH, LOOKUPP, PUTPUBFH, PUTROOTFH, READLINK, RESTOREFH, SAVEFH: no arguments
        10 | 16 | 23 | 24 | 27 | 31 | 32 => Ok(()),
        // ACCESS (access mask), RECLAIM_COMPLETE (one_fs)
        3 | 58 => x.u32().map(drop),
        // COMMIT (offset, count)
        5 => x.skip(12),
        // GETATTR (bitmap)
        9 => bitmap(x),
        // LOOKUP, REMOVE (component)
        15 | 28 => x.skip_opaque(None),
        // PUTFH (nfs_fh4)
        22 => x.skip_opaque(Some(128)),
        // READ (stateid 16, offset 8, count 4)
        25 => x.skip(28),
        // READDIR (cookie 8, verifier 8, dircount 4, maxcount 4, bitmap)
        26 => {
            x.skip(24)?;
            bitmap(x)
        }
        // RENEW (clientid 8)
        30 => x.skip(8),
        // SEQUENCE (sessionid 16, seqid, slotid, highest_slotid, cachethis)
        53 => x.skip(32),
        // WRITE (stateid 16, offset 8, stable 4, data<>)
        38 => {
            x.skip(28)?;
            x.skip_opaque(None)
        }
        _ => Err(RpcError::Truncated { have: 0, needed: 0 }),
    }
}

/// NFSv3's procedure names (RFC 1813 §3.3), by number.
pub const NFS3_PROCEDURES: [&str; 22] = [
    "NULL",
    "GETATTR",
    "SETATTR",
    "LOOKUP",
    "ACCESS",
    "READLINK",
    "READ",
    "WRITE",
    "CREATE",
    "MKDIR",
    "SYMLINK",
    "MKNOD",
    "REMOVE",
    "RMDIR",
    "RENAME",
    "LINK",
    "READDIR",
    "READDIRPLUS",
    "FSSTAT",
    "FSINFO",
    "PATHCONF",
    "COMMIT",
];

/// MOUNT v3's procedure names (RFC 1813 §5.2), by number.
const MOUNT3_PROCEDURES: [&str; 6] = ["NULL", "MNT", "DUMP", "UMNT", "UMNTALL", "EXPORT"];

/// NFSv4.0–4.2's operation names (RFC 7530 §16, RFC 8881 §18, RFC 7862 §15), from
/// operation 3 (ACCESS) to 75 (REMOVEXATTR, RFC 8276).
const NFS4_OPS: [&str; 73] = [
    "ACCESS",
    "CLOSE",
    "COMMIT",
    "CREATE",
    "DELEGPURGE",
    "DELEGRETURN",
    "GETATTR",
    "GETFH",
    "LINK",
    "LOCK",
    "LOCKT",
    "LOCKU",
    "LOOKUP",
    "LOOKUPP",
    "NVERIFY",
    "OPEN",
    "OPENATTR",
    "OPEN_CONFIRM",
    "OPEN_DOWNGRADE",
    "PUTFH",
    "PUTPUBFH",
    "PUTROOTFH",
    "READ",
    "READDIR",
    "READLINK",
    "REMOVE",
    "RENAME",
    "RENEW",
    "RESTOREFH",
    "SAVEFH",
    "SECINFO",
    "SETATTR",
    "SETCLIENTID",
    "SETCLIENTID_CONFIRM",
    "VERIFY",
    "WRITE",
    "RELEASE_LOCKOWNER",
    "BACKCHANNEL_CTL",
    "BIND_CONN_TO_SESSION",
    "EXCHANGE_ID",
    "CREATE_SESSION",
    "DESTROY_SESSION",
    "FREE_STATEID",
    "GET_DIR_DELEGATION",
    "GETDEVICEINFO",
    "GETDEVICELIST",
    "LAYOUTCOMMIT",
    "LAYOUTGET",
    "LAYOUTRETURN",
    "SECINFO_NO_NAME",
    "SEQUENCE",
    "SET_SSV",
    "TEST_STATEID",
    "WANT_DELEGATION",
    "DESTROY_CLIENTID",
    "RECLAIM_COMPLETE",
    "ALLOCATE",
    "COPY",
    "COPY_NOTIFY",
    "DEALLOCATE",
    "IO_ADVISE",
    "LAYOUTERROR",
    "LAYOUTSTATS",
    "OFFLOAD_CANCEL",
    "OFFLOAD_STATUS",
    "READ_PLUS",
    "SEEK",
    "WRITE_SAME",
    "CLONE",
    "GETXATTR",
    "SETXATTR",
    "LISTXATTRS",
    "REMOVEXATTR",
];

/// The name of NFSv4 operation `op` (`OP_ILLEGAL` is 10044).
pub fn nfs4_op_name(op: u32) -> Option<&'static str> {
    match op {
        10044 => Some("ILLEGAL"),
        3..=75 => NFS4_OPS.get(op as usize - 3).copied(),
        _ => None,
    }
}

/// The name of procedure `procedure` of `program` version `version`, for NFSv3, NFSv4
/// (NULL and COMPOUND) and MOUNT v3; `None` for others.
pub fn procedure_name(program: u32, version: u32, procedure: u32) -> Option<&'static str> {
    match (program, version) {
        (NFS_PROGRAM, 3) => NFS3_PROCEDURES.get(procedure as usize).copied(),
        (NFS_PROGRAM, 4) => ["NULL", "COMPOUND"].get(procedure as usize).copied(),
        (MOUNT_PROGRAM, 3) => MOUNT3_PROCEDURES.get(procedure as usize).copied(),
        _ => None,
    }
}

/// A TCP record mark (RFC 5531 §11): the last-fragment bit and the fragment's length
/// in bytes, from the 4 bytes before each record fragment.
pub fn record_mark(b: [u8; 4]) -> (bool, u32) {
    let v = u32::from_be_bytes(b);
    (v & 0x8000_0000 != 0, v & 0x7fff_ffff)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An RPC call header with AUTH_UNIX-like credentials of `cred_len` bytes and an
    /// empty verifier, followed by `args`.
    pub(crate) fn call(xid: u32, prog: u32, vers: u32, proc_: u32, args: &[u32]) -> Vec<u8> {
        let mut w = vec![xid, 0, 2, prog, vers, proc_, 1, 8, 0x1234, 0, 0, 0];
        w.extend_from_slice(args);
        w.iter().flat_map(|v| v.to_be_bytes()).collect()
    }

    /// An accepted, successful reply header.
    pub(crate) fn reply(xid: u32) -> Vec<u8> {
        [xid, 1, 0, 0, 0, 0].iter().flat_map(|v| v.to_be_bytes()).collect()
    }

    #[test]
    fn decodes_an_nfs3_read_call_and_its_reply() {
        let m = decode(&call(0xdead_beef, NFS_PROGRAM, 3, 6, &[])).unwrap();
        assert_eq!(m.xid, 0xdead_beef);
        let RpcBody::Call(c) = m.body else { panic!("not a call") };
        assert_eq!(c.name(), "NFSv3 READ");
        assert_eq!(decode(&reply(7)).unwrap(), RpcMessage { xid: 7, body: RpcBody::Reply { accepted: true } });
    }

    #[test]
    fn names_compound_operations_as_far_as_they_are_captured() {
        // tag "", minorversion 1, 3 ops: SEQUENCE(32 bytes), PUTFH(fh of 8 bytes), READ(28 bytes).
        let mut args = vec![0, 1, 3, 53, 0, 0, 0, 0, 1, 0, 0, 0, 22, 8, 0xa, 0xb, 25];
        args.extend([0u32; 7]);
        let full = call(1, NFS_PROGRAM, 4, 1, &args);
        let RpcBody::Call(c) = decode(&full).unwrap().body else { panic!() };
        assert_eq!(c.name(), "NFSv4 COMPOUND(SEQUENCE,PUTFH,READ)");
        // Cut inside PUTFH's handle: the list stops after PUTFH's number.
        let RpcBody::Call(c) = decode(&full[..full.len() - 36]).unwrap().body else { panic!() };
        assert_eq!(c.ops, ["SEQUENCE", "PUTFH"]);
    }

    #[test]
    fn refuses_what_is_not_an_rpc_header() {
        assert!(matches!(decode(&[0; 6]), Err(RpcError::Truncated { have: 6, needed: 8 })));
        let mut bad = reply(1);
        bad[7] = 5;
        assert_eq!(decode(&bad), Err(RpcError::MessageType(5)));
        let mut v3 = call(1, NFS_PROGRAM, 3, 6, &[]);
        v3[11] = 3;
        assert_eq!(decode(&v3), Err(RpcError::RpcVersion(3)));
    }

    #[test]
    fn names_cover_every_nfs3_procedure_and_unknown_programs() {
        assert_eq!(procedure_name(NFS_PROGRAM, 3, 21), Some("COMMIT"));
        assert_eq!(procedure_name(NFS_PROGRAM, 3, 22), None);
        assert_eq!(nfs4_op_name(75), Some("REMOVEXATTR"));
        let c = RpcCall { program: 100099, version: 1, procedure: 2, ops: vec![] };
        assert_eq!(c.name(), "prog 100099 v1 proc 2");
        assert_eq!(record_mark([0x80, 0, 0, 0x10]), (true, 16));
    }
}
