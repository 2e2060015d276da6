//! Preparing one VM before QEMU starts: its folders, the qcow2 overlay over the shared
//! rootfs image, the initrd (rootfs part + the kernel's boot modules), the QEMU
//! configuration and command line, and the VM's initial record (every step `skipped`
//! until it runs).

use std::path::Path;

use crate::infra::images::cache::{Cache, EntryHold};
use crate::infra::images::gc::Outcome;
use crate::infra::images::{KernelArtifact, RootfsArtifact};
use crate::infra::net::mac_for;
use crate::infra::qemu::args::{command_line, kernel_cmdline, Accelerator, GuestRam, QemuConfig};
use crate::infra::qemu::state::{self, StateSupport};
use crate::plan::{Plan, VmPlan};

use super::record::{StepRecord, StepStatus, VmRecord, VmStart};
use super::{io_err, RunError};

/// What [`prepare_vm`] made.
#[derive(Debug)]
pub(super) struct Prepared {
    /// QEMU's configuration.
    pub config: QemuConfig,
    /// The VM's record, before it boots.
    pub record: VmRecord,
    /// Its kind's saved-state key, when saved states are used.
    pub state_key: Option<String>,
    /// The saved state it starts from, held for the run (its overlay backs the VM's).
    pub restore_hold: Option<EntryHold>,
    /// Its QEMU command line's file (`vms/<vm>/qemu-cmdline.txt`).
    pub cmdline_file: std::path::PathBuf,
    /// What the user should hear about its saved state (one it could not use).
    pub notice: Option<String>,
    /// How to boot it instead, when `config` restores it: used if QEMU can't load the
    /// saved state.
    pub boot_config: Option<BootInstead>,
}

/// Where and with what a VM is prepared.
#[derive(Debug)]
pub(super) struct Inputs<'a> {
    /// The run's plan.
    pub plan: &'a Plan,
    /// The run folder.
    pub run_dir: &'a Path,
    /// The run's private temp folder.
    pub tmp_dir: &'a Path,
    /// The VM's kernel.
    pub kernel: &'a KernelArtifact,
    /// The VM's root filesystem.
    pub rootfs: &'a RootfsArtifact,
    /// Its tap device.
    pub tap: &'a str,
    /// The accelerator it uses.
    pub accel: Accelerator,
    /// The cache (saved VM states are entries of it).
    pub cache: &'a Cache,
    /// Set when saved VM states are used (see [`crate::infra::qemu::state`]).
    pub states: Option<&'a StateSupport>,
    /// The host CPU its QEMU is bound to (`--pin`).
    pub pinned_cpu: Option<usize>,
}

/// How to boot a VM whose saved state QEMU could not load: its configuration without
/// `-incoming`, whose root overlay (over the rootfs image) is created only then.
#[derive(Debug, Clone)]
pub(super) struct BootInstead {
    /// QEMU's configuration.
    pub config: QemuConfig,
    /// The rootfs image its overlay is created over.
    pub rootfs_image: std::path::PathBuf,
}

/// Removes the saved state `key` (if any) that VM `vm` can't use (unless another VM holds it:
/// gc leaves held entries), and gives the notice saying so, naming the entry
/// in it (`what`: "the saved state", "the saved state vmstate/KEY"), `why` the reason. The
/// caller has given up its own hold; a later boot of the kind saves the state again.
pub(super) fn discard_state(cache: &Cache, key: Option<&str>, vm: &str, what: &str, why: &str) -> String {
    let removed = key.is_some_and(|k| {
        matches!(
            crate::infra::images::gc::remove_entry(cache, &(state::KIND.to_string(), k.to_string()), false),
            Outcome::Removed
        )
    });
    format!(
        "notice: VM {vm}: {what} can't be used ({why}); booting it instead{}",
        if removed { "; the state was removed and will be saved again" } else { "" }
    )
}

/// Creates the qcow2 overlay `overlay` over `backing` (`raw` rootfs image or `qcow2`
/// saved overlay).
///
/// Errors: [`RunError::Io`] naming the overlay, with `qemu-img`'s message.
pub(super) fn create_overlay(backing: &Path, format: &str, overlay: &Path) -> Result<(), RunError> {
    let out = std::process::Command::new("qemu-img")
        .args(["create", "-q", "-f", "qcow2", "-F", format, "-b"])
        .arg(backing)
        .arg(overlay)
        .output()
        .map_err(io_err("running qemu-img for", overlay))?;
    if !out.status.success() {
        return Err(RunError::Overlay {
            path: overlay.to_path_buf(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

/// Prepares VM `v`: writes `vms/<vm>/qemu-cmdline.txt` under the run folder and the
/// overlay and initrd under `<temp folder>/<vm>/` (a 0700 folder). When its kind has a
/// saved state (see [`crate::infra::qemu::state`]), the VM restores it: its overlay
/// is backed by the saved one, QEMU gets `-incoming`, and its console log starts with
/// the saved guest's boot log.
///
/// Errors: [`RunError::Io`] naming the file or tool (`qemu-img`) that failed.
// Over 100 lines, kept whole for now: only the VM tier runs it (qemu-img, initrd,
// saved states), so a split could not be checked by `cargo fast`.
pub(super) fn prepare_vm(v: &VmPlan, input: &Inputs<'_>) -> Result<Prepared, RunError> {
    let Inputs { plan, run_dir, tmp_dir, kernel, rootfs, tap, accel, cache, states, pinned_cpu } = *input;
    let vdir = run_dir.join("vms").join(&v.name);
    std::fs::create_dir_all(&vdir).map_err(io_err("creating VM results folder", &vdir))?;
    let tdir = tmp_dir.join(&v.name);
    std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
        .create(&tdir)
        .map_err(io_err("creating VM temp folder", &tdir))?;
    let overlay = tdir.join("root.qcow2");
    let initrd = tdir.join("initrd.cpio");
    crate::infra::images::initramfs::concat(&[&rootfs.initramfs_base, &kernel.initramfs_modules], &initrd)
        .map_err(io_err("writing initrd", &initrd))?;
    let cidr = format!("{}/{}", v.address, plan.subnet.prefix_len());
    let mut config = QemuConfig {
        name: v.name.clone(),
        memory_mib: v.memory_mib,
        cpus: v.cpus,
        accel,
        kernel: kernel.image.clone(),
        initrd,
        append: kernel_cmdline(v.cmdline.as_deref()),
        root_overlay: overlay.clone(),
        modules_disk: kernel.modules_disk.clone(),
        tap: tap.to_string(),
        mac: mac_for(&plan.suite, &v.name),
        qmp_socket: tdir.join("qmp.sock"),
        qga_socket: tdir.join("qga.sock"),
        console_log: vdir.join("console.log"),
        shell_socket: tdir.join(crate::run::SHELL_SOCKET),
        ram: states.map_or(GuestRam::Anonymous, StateSupport::booting_ram),
        incoming: None,
        console_append: false,
        pinned_cpu,
        capture: super::capture::qemu_capture(v, &vdir),
    };
    let bases: Vec<&Path> = std::iter::once(rootfs.image.as_path()).chain(kernel.modules_disk.as_deref()).collect();
    let state_key = states.map(|s| state::state_key(&config, &kernel.key, &rootfs.key, &bases, s));
    let mut notice = None;
    let saved = state_key.as_deref().and_then(|k| cache.hold_existing(state::KIND, k)).and_then(|(dir, hold)| {
        // An entry that can't be used (a file missing or not a regular file, its
        // overlay not one qemu-img can open) is removed, and this VM boots and saves
        // it again.
        let (state_file, root) = (dir.join(state::STATE_FILE), dir.join(state::ROOT_FILE));
        let ram_size =
            std::fs::symlink_metadata(dir.join(state::RAM_FILE)).ok().filter(|m| m.is_file()).map(|m| m.len());
        let problem = if !(state_file.is_file() && root.is_file()) {
            Some(format!("{} or {} is missing or not a regular file", state::STATE_FILE, state::ROOT_FILE))
        } else if config.ram != GuestRam::Anonymous && ram_size != Some(v.memory_mib << 20) {
            Some(format!("{} is missing, not a regular file, or not {} MiB", state::RAM_FILE, v.memory_mib))
        } else if !state::usable_path(&state_file) {
            return None;
        } else {
            create_overlay(&root, "qcow2", &overlay).err().map(|e| e.to_string())
        };
        match problem {
            None => Some((dir, hold)),
            Some(why) => {
                let entry = hold.entry();
                drop(hold);
                notice = Some(discard_state(
                    cache,
                    state_key.as_deref(),
                    &v.name,
                    &format!("the saved state {entry}"),
                    &why,
                ));
                None
            }
        }
    });
    let mut boot_config = None;
    let restore_hold = match saved {
        Some((dir, hold)) => {
            boot_config = Some(BootInstead {
                config: QemuConfig { root_overlay: tdir.join("root-boot.qcow2"), ..config.clone() },
                rootfs_image: rootfs.image.clone(),
            });
            let boot_log = std::fs::read(dir.join(state::CONSOLE_FILE)).unwrap_or_default();
            let mut log = format!(
                "vmrepro: the boot log below is the saved guest's (saved state {}); {} starts from that state\n",
                hold.entry(),
                v.name
            )
            .into_bytes();
            log.extend_from_slice(&boot_log);
            log.extend_from_slice(format!("\nvmrepro: {} restored from the saved state\n", v.name).as_bytes());
            std::fs::write(&config.console_log, log).map_err(io_err("writing", &config.console_log))?;
            config.incoming = Some(dir.join(state::STATE_FILE));
            if config.ram != GuestRam::Anonymous {
                config.ram = GuestRam::Mapped(dir.join(state::RAM_FILE));
            }
            config.console_append = true;
            Some(hold)
        }
        None => {
            create_overlay(&rootfs.image, "raw", &overlay)?;
            None
        }
    };
    let cmdline = command_line(&config);
    let cmd_path = vdir.join("qemu-cmdline.txt");
    std::fs::write(&cmd_path, format!("{cmdline}\n")).map_err(io_err("writing", &cmd_path))?;
    let record = VmRecord {
        name: v.name.clone(),
        kernel: v.kernel.label(),
        kernel_release: kernel.release.clone(),
        address: cidr,
        mac: config.mac.clone(),
        tap: config.tap.clone(),
        accel: config.accel,
        pid: None,
        boot_s: None,
        start_phases: None,
        ending: None,
        console_log: format!("vms/{}/console.log", v.name),
        qemu_cmdline: format!("vms/{}/qemu-cmdline.txt", v.name),
        clock: None,
        start: Some(if restore_hold.is_some() { VmStart::Restored } else { VmStart::Booted }),
        state: state_key.clone(),
        state_ram: states.map(|s| s.ram),
        state_saved: false,
        pinned_cpu,
        steps: v
            .steps
            .iter()
            .map(|s| StepRecord {
                name: s.name.clone(),
                kind: s.kind.clone(),
                status: StepStatus::Skipped,
                exit_code: None,
                signal: None,
                expect_exit: s.expect_exit,
                duration_s: 0.0,
                started_s: None,
                stdout: None,
                stderr: None,
                error: None,
                diagnostics: None,
                snapshot: s.snapshot,
                capture_bytes: None,
            })
            .collect(),
        capture: super::capture::record_of(v),
    };
    Ok(Prepared { config, record, state_key, restore_hold, boot_config, cmdline_file: cmd_path, notice })
}
