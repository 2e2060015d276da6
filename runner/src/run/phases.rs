//! The phases of a run, in order ([`execute`]): the host's memory, the images and the
//! environment, the accelerator, the temp folder and the network, the VMs, the steps.
//! Everything a phase holds goes into the run's [`Resources`], which
//! [`run_with`](super::run_with) tears down whatever happens.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::keep;
use super::record::{write_json, NamespaceRecord};
use super::resources::{create_temp_dir, sweep_stale_temp_dirs, Resources};
use super::scheduler::{self, Recorder};
use super::{environment, images, io_err, prepare, RunError, RunOptions};
use crate::events::{Event, EventSink};
use crate::infra::images::{Cache, Catalog, Resolved};
use crate::infra::net::Namespace;
use crate::infra::qemu::accel::{probe_cached, AccelChoice};
use crate::infra::qemu::args::Accelerator;
use crate::infra::qemu::state::{StateMeta, StateRam, StateSupport};
use crate::infra::qemu::vm::Vm;
use crate::plan::Plan;
use crate::schema::Accel;

/// The run's phases, in order; each records what it did and returns what the next
/// needs. Everything they hold is in `res`, which the caller tears down.
pub(super) async fn execute(
    plan: &Plan,
    opts: &RunOptions,
    cache: &Cache,
    rec: &Recorder,
    res: &mut Resources,
    stop: tokio::sync::watch::Sender<bool>,
) -> Result<(), RunError> {
    check_host_memory(plan, host_memory_mib())?;
    let (images, env) = resolve_images(plan, &opts.catalog, cache, rec, res).await?;
    let t_boot = Instant::now();
    let accel_for = choose_accel(plan, &images.kernels[&plan.vms[0].kernel.label()].image, cache, rec).await?;
    rec.record.lock().expect("not poisoned").accel = Some(accel_for(plan.vms[0].accel));
    let tmp_path = open_temp_dir(rec, res, stop)?;
    let (ns, taps) = open_network(plan, rec, &mut res.ns)?;
    let ctx = StartContext { plan, rec, cache, images: &images, tmp_path: &tmp_path, taps: &taps, ns };
    let states = if opts.fresh_boot { None } else { state_support(&env, opts.state_ram, &opts.events) };
    let pinned = if opts.pin { pin_vms(plan, rec) } else { vec![None; plan.vms.len()] };
    let starts = start_vms(&ctx, &mut res.vms, &mut res.state_holds, &accel_for, states.as_ref(), &pinned)?;
    rec.save()?;
    run_steps(plan, rec, &mut res.vms, &starts, t_boot).await
}

/// Resolves the images (recording them and their time), then writes the run's
/// environment and holds every image for the run.
///
/// Errors: [`RunError::Image`] with the first image that failed.
async fn resolve_images(
    plan: &Plan,
    catalog: &Catalog,
    cache: &Cache,
    rec: &Recorder,
    res: &mut Resources,
) -> Result<(Resolved, environment::Environment), RunError> {
    let t_img = Instant::now();
    let mut images = images::resolve(plan, cache, catalog, &rec.events).await;
    {
        let mut r = rec.record.lock().expect("not poisoned");
        r.timings.images_s = t_img.elapsed().as_secs_f64();
        r.images = std::mem::take(&mut images.records);
    }
    if !images.failures.is_empty() {
        return Err(RunError::Image(images.failures.remove(0).1));
    }
    images::check_role_needs(plan, &images.kernels)?;
    // What a published report says about the host, the tools and the inputs.
    let env = environment::collect(plan, catalog, cache, &images.kernels, &images.rootfs);
    write_json(&rec.dir.join(environment::ENVIRONMENT_FILE), &env)?;
    res.holds.extend(images.kernels.values().map(|k| k.hold.clone()));
    res.holds.extend(images.rootfs.values().map(|r| r.hold.clone()));
    rec.save()?;
    Ok((images, env))
}

/// The run's private temp folder, with its control socket for `vmrepro stop`, kept in
/// `res` so that it outlives every QEMU (see [`run`](super::run)).
fn open_temp_dir(
    rec: &Recorder,
    res: &mut Resources,
    stop: tokio::sync::watch::Sender<bool>,
) -> Result<PathBuf, RunError> {
    let tmp_root = std::env::temp_dir();
    for stale in sweep_stale_temp_dirs(&tmp_root) {
        (rec.events)(Event::Notice(format!(
            "notice: removed {}, the temp folder of an earlier run whose runner was killed",
            stale.display()
        )));
    }
    let (tmp, tmp_lock) = create_temp_dir(&tmp_root)?;
    let tmp_path = tmp.path().to_path_buf();
    res.tmp = Some(tmp);
    res.tmp_lock = Some(tmp_lock);
    res.control = Some(keep::Control::bind(&tmp_path, stop).map_err(io_err("listening on", &tmp_path))?);
    rec.record.lock().expect("not poisoned").temp_dir = Some(tmp_path.display().to_string());
    Ok(tmp_path)
}

/// The run's network namespace (kept in `slot`, so that it outlives every QEMU) with
/// the bridge and one tap per VM; returns it and the taps' names.
fn open_network<'a>(
    plan: &Plan,
    rec: &Recorder,
    slot: &'a mut Option<Namespace>,
) -> Result<(&'a Namespace, Vec<String>), RunError> {
    let t_net = Instant::now();
    let ns = slot.insert(Namespace::create()?);
    rec.record.lock().expect("not poisoned").network_namespace =
        Some(NamespaceRecord { holder_pid: ns.holder_pid(), inode: ns.inode() });
    let taps: Vec<String> = (0..plan.vms.len()).map(|i| format!("tap{i}")).collect();
    ns.create_bridge("br0", plan.mtu, &taps)?;
    rec.record.lock().expect("not poisoned").timings.network_s = t_net.elapsed().as_secs_f64();
    Ok((&*ns, taps))
}

/// Whether this host's QEMU and kernel can save and restore VM states (holding the
/// RAM as `ram` asks, or in the fallback); `None`, with a notice saying why, when not.
fn state_support(env: &environment::Environment, ram: StateRam, events: &EventSink) -> Option<StateSupport> {
    match StateSupport::probe(&env.host.qemu_version, &env.host.kernel, ram) {
        Ok(s) => {
            if let Some(why) = &s.ram_fallback {
                events(Event::Notice(format!("notice: {why}")));
            }
            Some(s)
        }
        Err(why) => {
            events(Event::Notice(format!("notice: {why}")));
            None
        }
    }
}

/// What every VM's start needs from the phases before.
struct StartContext<'a> {
    plan: &'a Plan,
    rec: &'a Recorder,
    cache: &'a Cache,
    images: &'a Resolved,
    tmp_path: &'a Path,
    taps: &'a [String],
    ns: &'a Namespace,
}

/// Prepares and spawns every VM's QEMU (into `vms`, holding any saved state it starts
/// from in `state_holds`), recording each; returns how the scheduler starts each one
/// (boot, or restore from its kind's saved state).
fn start_vms<'a>(
    ctx: &StartContext<'a>,
    vms: &mut Vec<Vm>,
    state_holds: &mut Vec<scheduler::StateHold>,
    accel_for: &impl Fn(Accel) -> Accelerator,
    states: Option<&StateSupport>,
    pinned: &[Option<usize>],
) -> Result<Vec<scheduler::StartPlan<'a>>, RunError> {
    let (plan, rec, ns) = (ctx.plan, ctx.rec, ctx.ns);
    let mut starts = Vec::new();
    for (i, v) in plan.vms.iter().enumerate() {
        let kernel = &ctx.images.kernels[&v.kernel.label()];
        let rootfs = &ctx.images.rootfs[&v.rootfs_request().id()];
        let inputs = prepare::Inputs {
            plan,
            run_dir: &rec.dir,
            tmp_dir: ctx.tmp_path,
            kernel,
            rootfs,
            tap: &ctx.taps[i],
            accel: accel_for(v.accel),
            cache: ctx.cache,
            states,
            pinned_cpu: pinned[i],
        };
        let p = prepare::prepare_vm(v, &inputs)?;
        if let Some(n) = &p.notice {
            (rec.events)(Event::Notice(n.clone()));
        }
        let hold: scheduler::StateHold = Arc::new(Mutex::new(p.restore_hold));
        state_holds.push(hold.clone());
        starts.push(scheduler::StartPlan {
            cache: ctx.cache,
            ns,
            state_key: p.state_key.clone(),
            boot_config: p.boot_config.clone(),
            hold,
            cmdline_file: p.cmdline_file.clone(),
            meta: StateMeta {
                kernel_release: kernel.release.clone(),
                rootfs: rootfs.name.clone(),
                memory_mib: v.memory_mib,
                saved_from: format!("{}/{}", plan.suite, v.name),
                ram_bytes: 0,
                took_s: 0.0,
            },
            cidr: p.record.address.clone(),
            mtu: plan.mtu,
        });
        rec.record.lock().expect("not poisoned").vms.push(p.record);
        let vdir = rec.dir.join("vms").join(&v.name);
        let vm = Vm::spawn(&p.config, ns, &vdir.join("qemu.stderr"))?;
        rec.set_vm(&v.name, |r| r.pid = Some(vm.pid() as u32));
        vms.push(vm);
        (rec.events)(Event::VmStarted { vm: v.name.clone(), restoring: p.config.incoming.is_some() });
    }
    Ok(starts)
}

/// Runs every VM's steps at once (each VM's in order, `after` waits across VMs), and
/// records the boot and steps times.
async fn run_steps(
    plan: &Plan,
    rec: &Recorder,
    vms: &mut [Vm],
    starts: &[scheduler::StartPlan<'_>],
    t_boot: Instant,
) -> Result<(), RunError> {
    let (progress, _) = tokio::sync::watch::channel(BTreeMap::new());
    let booted_at: Mutex<Option<Instant>> = Mutex::new(None);
    let rounds = super::rounds::Rounds::new(&plan.measurements);
    let bounds = super::waits::WaitBounds::new(&plan.vms);
    let shared =
        scheduler::Shared { progress: &progress, rec, rounds: &rounds, bounds: &bounds, booted_at: &booted_at };
    let result = futures::future::try_join_all(
        vms.iter_mut().zip(&plan.vms).zip(starts).map(|((vm, vp), start)| scheduler::run_vm(vm, vp, shared, start)),
    )
    .await
    .map(|_| ());
    {
        let mut r = rec.record.lock().expect("not poisoned");
        let booted = booted_at.lock().expect("not poisoned").unwrap_or_else(Instant::now);
        r.timings.boot_s = booted.duration_since(t_boot).as_secs_f64();
        r.timings.steps_s = booted.elapsed().as_secs_f64();
    }
    result
}

/// The host's RAM in MiB (`MemTotal` of `/proc/meminfo`), or `None` if unreadable.
fn host_memory_mib() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib = text.lines().find_map(|l| l.strip_prefix("MemTotal:"))?.trim().strip_suffix("kB")?.trim();
    Some(kib.parse::<u64>().ok()? / 1024)
}

/// Refuses a plan whose VMs' `memory:` adds up to more than `host_mib` (checked before
/// any image is built: such a run could only end in the host's OOM killer). Guests
/// touch only what they use, so a plan below the host's RAM may still run short of it.
/// Nothing is checked when the host's RAM is unknown.
///
/// Errors: [`RunError::HostMemory`].
fn check_host_memory(plan: &Plan, host_mib: Option<u64>) -> Result<(), RunError> {
    let needed_mib = plan.vms.iter().map(|v| v.memory_mib).fold(0u64, u64::saturating_add);
    match host_mib {
        Some(host_mib) if needed_mib > host_mib => {
            Err(RunError::HostMemory { vms: plan.vms.len(), needed_mib, host_mib })
        }
        _ => Ok(()),
    }
}

/// Each VM's host CPU for `--pin` (see [`crate::infra::qemu::pin`]): a VM with a server
/// profile serves. Says where each VM runs in a notice, or why none is pinned.
fn pin_vms(plan: &Plan, rec: &Recorder) -> Vec<Option<usize>> {
    use crate::infra::qemu::pin;
    let events = &rec.events;
    let serves: Vec<bool> = plan.vms.iter().map(|v| v.profile.is_some()).collect();
    match pin::allowed_cpus().and_then(|cpus| pin::assign(&serves, &cpus)) {
        Ok(cpus) => {
            let each: Vec<String> = plan.vms.iter().zip(&cpus).map(|(v, c)| format!("{} on CPU {c}", v.name)).collect();
            events(Event::Notice(format!("notice: --pin: {}", each.join(", "))));
            cpus.into_iter().map(Some).collect()
        }
        Err(e) => {
            events(Event::Notice(format!("notice: {e}")));
            rec.record.lock().expect("not poisoned").pin_notice = Some(e.to_string());
            vec![None; plan.vms.len()]
        }
    }
}

/// Probes KVM once (with `kernel`, the first VM's) if any VM may use it, and returns how
/// a VM's requested [`Accel`] maps to the accelerator used. A fallback to TCG is noticed
/// once and recorded.
///
/// Errors: [`RunError::Kvm`] when a VM requires KVM and it doesn't work here.
async fn choose_accel(
    plan: &Plan,
    kernel: &Path,
    cache: &Cache,
    rec: &Recorder,
) -> Result<impl Fn(Accel) -> Accelerator, RunError> {
    let mut choice: Option<AccelChoice> = None;
    if plan.vms.iter().any(|v| v.accel != Accel::Tcg) {
        let c = probe_cached(kernel, &cache.root().join("accel-probe.json")).await;
        if let Some(why) = &c.fallback_reason {
            if plan.vms.iter().any(|v| v.accel == Accel::Kvm) {
                return Err(RunError::Kvm(why.clone()));
            }
            let notice = format!("notice: KVM not usable here ({why}); using TCG (software emulation)");
            (rec.events)(Event::Notice(notice.clone()));
            rec.record.lock().expect("not poisoned").accel_notice = Some(notice);
        }
        choice = Some(c);
    }
    Ok(move |a: Accel| match a {
        Accel::Tcg => Accelerator::Tcg,
        _ => choice.as_ref().map_or(Accelerator::Tcg, |c| c.accel),
    })
}
