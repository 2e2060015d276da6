//! Back-of-the-envelope model of the RPC retransmit-timeout carry-over that
//! `suites/nfs-udp-rto-carryover.yaml` measures: how many times longer an unpatched
//! Linux RPC-over-UDP client waits for lost replies than one patched with
//! `images/kernels/patches/sunrpc-no-rto-carryover.patch`.
//!
//! ```text
//! cargo run --example rto_carryover_model -- 13 3     # packet loss %, fragments per reply
//! ```
//!
//! The model covers `rpc_set_timeo()` (include/linux/sunrpc/timer.h, Linux 6.1) and
//! nothing else. Requests go one at a time (the suite's `read_ahead_kb: 0`); each
//! transmission's reply is lost with probability `p = 1 - (1 - loss)^fragments`, so a
//! request needs `k` retransmissions with probability `(1 - p) p^k`. The carried-over
//! count `t` (`ntimeouts[timer]`, at most 8) becomes `k` if `k >= t`, else `t - 1`.
//! The unpatched kernel shifts every timeout of the next request left by `t`, the
//! patched one does not, so the unpatched kernel waits `E[2^t]` times as long for lost
//! replies, `t` taken from the chain's stationary distribution. Not modelled: the RTT
//! estimator's warm-up after each mount, the requests' own back-off after `timeo`, and
//! major timeouts (which reset `t` and the estimator) — the measured ratio includes
//! them.

use std::process::ExitCode;

/// Largest carried-over count (`rpc_set_timeo()` caps `ntimeo` at 8).
const MAX_T: usize = 8;

/// Stationary distribution of the carried-over count for reply loss `p` (0 ≤ p < 1),
/// by power iteration of the transition matrix.
fn stationary(p: f64) -> [f64; MAX_T + 1] {
    let mut pi = [0.0; MAX_T + 1];
    pi[0] = 1.0;
    for _ in 0..10_000 {
        let mut next = [0.0; MAX_T + 1];
        for (t, &mass) in pi.iter().enumerate() {
            // k retransmissions, k = 0..; the tail k > 200 is negligible for p < 0.9.
            for k in 0..200usize {
                let pk = (1.0 - p) * p.powi(k as i32);
                let nt = if k >= t { k.min(MAX_T) } else { t - 1 };
                next[nt] += mass * pk;
            }
        }
        pi = next;
    }
    pi
}

/// `E[2^t]`: how many times longer the unpatched kernel waits for a lost reply.
fn carry_over_factor(p: f64) -> f64 {
    stationary(p).iter().enumerate().map(|(t, m)| m * (1u32 << t) as f64).sum()
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parsed = match args.as_slice() {
        [loss, frags] => loss.parse::<f64>().ok().zip(frags.parse::<u32>().ok()),
        _ => None,
    };
    let Some((loss_pct, fragments)) = parsed.filter(|(l, f)| (0.0..100.0).contains(l) && *f >= 1) else {
        eprintln!("usage: rto_carryover_model LOSS_PERCENT FRAGMENTS_PER_REPLY   (e.g. 13 3)");
        return ExitCode::from(2);
    };
    let p = 1.0 - (1.0 - loss_pct / 100.0).powi(fragments as i32);
    println!(
        "packet loss {loss_pct} %, {fragments} fragments per reply: reply loss {:.1} %, \
         retransmissions per request {:.2}, unpatched/patched wait for lost replies {:.2}x",
        p * 100.0,
        p / (1.0 - p),
        carry_over_factor(p)
    );
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_loss_means_no_carry_over() {
        assert_eq!(carry_over_factor(0.0), 1.0);
    }

    #[test]
    fn factor_grows_with_reply_loss() {
        let f: Vec<f64> = [0.1, 0.3, 0.5].iter().map(|&p| carry_over_factor(p)).collect();
        assert!(f[0] > 1.0 && f[0] < f[1] && f[1] < f[2], "{f:?}");
    }

    #[test]
    fn distribution_sums_to_one() {
        let s: f64 = stationary(0.34).iter().sum();
        assert!((s - 1.0).abs() < 1e-9, "{s}");
    }
}
