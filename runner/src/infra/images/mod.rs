//! Images: kernels, root filesystems and guest profiles, built or fetched once and kept
//! in a content-addressed cache.
//!
//! The project's `images/` folder holds the recipes ([`Catalog`]): the pinned Debian
//! kernel manifest (`kernels.yaml`), rootfs recipes (`rootfs/<name>.yaml` + overlay),
//! the initramfs `/init`, and guest profiles (`profiles/<name>.sh`). This module turns
//! them into artefacts ([`KernelArtifact`], [`RootfsArtifact`]) under the [`Cache`].
//!
//! [`catalog`] reads and checks that folder; [`tool`] runs the external build tools;
//! [`error`] holds [`ImageError`]; [`resolve_all`] resolves a plan's images at once.

pub mod buildlock;
pub mod cache;
pub mod catalog;
pub mod cost;
pub mod debian;
pub mod error;
pub mod gc;
pub mod index;
pub mod initramfs;
pub mod kernel;
pub mod modules;
pub mod pin;
pub mod repin;
pub mod resolve;
pub mod rootfs;
pub mod sandbox;
pub mod source;
pub mod tool;
pub mod tree;

pub use cache::{Cache, CacheOutcome};
pub(crate) use catalog::KernelManifest;
pub use catalog::{Catalog, PinnedKernel, PinnedSource, RootfsRecipe, DEFAULT_FLAVOUR, DEFAULT_ROOTFS};
pub use error::ImageError;
pub use kernel::KernelArtifact;
pub use resolve::{resolve_all, ImageRecord, Resolved};
pub use rootfs::RootfsArtifact;
pub(crate) use tool::run_tool;
pub use tool::CancelFlag;
