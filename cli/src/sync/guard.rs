//! The checks that stop a run from taking an accident for the user's intent before it deletes
//! anything: the local folder on another file system than last time (an unmounted disk leaves
//! its empty mount point behind), the local folder empty while agreements exist, or a plan that
//! deletes more than a set share of what was agreed. `--allow-mass-delete` overrides them.

use std::path::Path;

use super::plan::{Action, Sides};
use super::state::State;
use crate::error::{CliError, CliResult, ExitKind};

/// A plan deleting more than this share of the agreed paths on one side is refused...
const MASS_DELETE_SHARE: f64 = 0.5;
/// ...when it deletes at least this many (deleting 3 of 4 files is an ordinary tidy-up).
const MASS_DELETE_MIN: usize = 10;

const OVERRIDE_HINT: &str = "mount the disk or restore the folder and run again; if the deletions are \
     what you want (or the folder really moved to another disk), run once with --allow-mass-delete";

/// The identity of the file system holding `root` (`st_dev` on Unix), `None` where unknown.
pub fn device_of(root: &Path) -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(root).ok().map(|meta| meta.dev().to_string())
    }
    #[cfg(not(unix))]
    {
        let _ = root;
        None
    }
}

fn refused(message: String) -> CliError {
    CliError::new(ExitKind::Unsafe, message).with_hint(OVERRIDE_HINT)
}

/// Refuses a local folder on another file system than the one the pair's agreements were made
/// on; records the file system when the state has none yet (or the check is overridden).
pub fn check_device(state: &State, root: &Path, allow: bool) -> CliResult<()> {
    let Some(now) = device_of(root) else { return Ok(()) };
    match state.root_device()? {
        Some(before) if before != now && !allow && !state.bases()?.is_empty() => Err(refused(format!(
            "{} is on another file system than when it was last synced (device {before}, now {now}): \
             is its disk unmounted?",
            root.display()
        ))),
        Some(before) if before == now => Ok(()),
        _ => state.set_root_device(&now),
    }
}

/// Refuses a plan that empties a side or deletes more than [`MASS_DELETE_SHARE`] of the agreed
/// paths there at once.
pub fn check_plan(actions: &[Action], sides: &Sides, allow: bool) -> CliResult<()> {
    let bases = &sides.bases;
    if allow || bases.is_empty() {
        return Ok(());
    }
    let mut remote_deletions = 0;
    let mut local_deletions = 0;
    for action in actions {
        match action {
            // A folder goes with everything below it.
            Action::TrashRemote { path, .. } | Action::ReplaceRemote { path, .. } => {
                let below = format!("{path}/");
                remote_deletions +=
                    1 + sides.remotes.range(below.clone()..).take_while(|(p, _)| p.starts_with(&below)).count();
            }
            Action::DeleteLocal { .. } => local_deletions += 1,
            Action::ReplaceLocal { below, .. } => local_deletions += 1 + below.len(),
            _ => {}
        }
    }
    if sides.locals.is_empty() && remote_deletions > 0 {
        return Err(refused(format!(
            "the local folder is empty, but {} path(s) were synced from it: is its disk unmounted? Nothing was deleted",
            bases.len()
        )));
    }
    let too_many =
        |deletions: usize| deletions >= MASS_DELETE_MIN && deletions as f64 > MASS_DELETE_SHARE * bases.len() as f64;
    for (deletions, side) in [(remote_deletions, "on the server"), (local_deletions, "here")] {
        if too_many(deletions) {
            return Err(refused(format!(
                "this run would delete {deletions} of {} synced path(s) {side} at once; nothing was deleted",
                bases.len()
            )));
        }
    }
    Ok(())
}
