//! `owner`: create the owner's key, show where it is, and seal the owner's facts.

use std::path::Path;

use clap::Subcommand;
use serde_json::json;

use super::{Ctx, Out};
use crate::kernel::authority::OwnerPub;
use crate::kernel::{Code, Error, Result, ops};
use crate::store::{Admin, StoreExt, owner};

/// `owner ...`.
#[derive(Debug, Subcommand)]
pub enum OwnerCmd {
    /// Create the owner key (or use yours) and put its public half in .loopx/owner.pub.
    #[command(after_help = "Example:\n  loopx owner init")]
    Init {
        /// Replace the project's owner.pub even if it holds another key.
        #[arg(long)]
        force: bool,
    },
    /// Where the key is and its fingerprint (never the secret).
    #[command(after_help = "Example:\n  loopx owner show --json")]
    Show,
    /// Sign the journal's head and the owner's facts (goal, quota, gates, user todos, leases).
    #[command(after_help = "Example:\n  loopx owner seal --adopt")]
    Seal {
        /// Seal the files as they are now, where you edited one by hand (default: keep the
        /// values of the last seal wherever a file differs from it).
        #[arg(long)]
        adopt: bool,
    },
    /// The devices you enrolled to decide gates (`loopx web pair`), or revoke one.
    #[command(after_help = "Examples:\n  loopx owner devices\n  loopx owner devices revoke phone")]
    Devices {
        /// `revoke NAME`: end a device; its decisions count as pending again.
        #[command(subcommand)]
        cmd: Option<DevicesCmd>,
    },
}

/// `owner devices ...`.
#[derive(Debug, Subcommand)]
pub enum DevicesCmd {
    /// End a device: it can no longer read or decide, and its decisions count as pending.
    #[command(after_help = "Example:\n  loopx owner devices revoke phone")]
    Revoke {
        /// The device's name, as `loopx owner devices` lists it.
        name: String,
    },
}

/// Runs `owner ...`.
pub fn run(ctx: &Ctx, c: OwnerCmd) -> Result<Out> {
    let home = ctx.open()?;
    let secret_path = owner::secret_path(&ctx.key)?;
    let project_pub = home.owner_pub()?;
    match c {
        OwnerCmd::Init { force } => init(ctx, &*home, &secret_path, project_pub, force),
        OwnerCmd::Seal { adopt } => seal(ctx, &*home, adopt),
        OwnerCmd::Show => show(ctx, &*home, &secret_path, project_pub),
        OwnerCmd::Devices { cmd: None } => devices(&*home),
        OwnerCmd::Devices {
            cmd: Some(DevicesCmd::Revoke { name }),
        } => revoke(ctx, &*home, &name),
    }
}

/// `owner init`: creates the key (or uses yours) and installs its public half.
fn init(
    ctx: &Ctx,
    home: &dyn Admin,
    secret_path: &Path,
    project_pub: Option<OwnerPub>,
    force: bool,
) -> Result<Out> {
    if let Some(p) = &project_pub
        && !force
    {
        return Err(Error::new(
            Code::KeyExists,
            format!(
                "this project has an owner key already ({})",
                p.fingerprint()
            ),
        )
        .hint("see it with `loopx owner show`; replace it with `loopx owner init --force`"));
    }
    let (key, created) = match owner::load(&ctx.key)? {
        Some(k) => (k, false),
        None => (owner::create(secret_path)?, true),
    };
    if project_pub.as_ref() == Some(&key.public()) {
        return Err(
            Error::new(Code::KeyExists, "owner.pub already holds your key")
                .hint("nothing to do; see `loopx owner show`"),
        );
    }
    home.install_owner(&key, project_pub.as_ref())?;
    let fp = key.public().fingerprint();
    let mut text = if created {
        format!("created the owner key {} ({fp})", secret_path.display())
    } else {
        format!("using your owner key {} ({fp})", secret_path.display())
    };
    text.push_str(&format!(
        "\nwrote {}; keep the secret key out of agents' reach",
        home.place_of("owner.pub")
    ));
    if project_pub.is_some() {
        text.push_str("\nthe old key's decisions no longer verify: they count as pending until you decide them again");
    }
    Ok(Out::new(
        "owner",
        json!({"key_path": secret_path, "created": created, "fingerprint": fp,
               "public_key_file": home.place_of("owner.pub"), "replaced": project_pub.map(|p| p.fingerprint())}),
        text,
    ))
}

/// `owner seal`: signs the journal's head and the owner's facts, keeping or adopting edits.
fn seal(ctx: &Ctx, home: &dyn Admin, adopt: bool) -> Result<Out> {
    let notes = home.mutate(|snap| ops::seal(snap, ops::OWNER, ctx.now, adopt))?;
    let mut text = String::from("sealed the journal's head and the owner's facts");
    for n in &notes {
        text.push_str(&format!(
            "\n{} {n}",
            if adopt { "adopted:" } else { "kept the seal:" }
        ));
    }
    if !adopt && !notes.is_empty() {
        text.push_str("\nif you made those edits yourself, run `loopx owner seal --adopt`");
    }
    Ok(Out::new(
        "seal",
        json!({"adopted": adopt, "differences": notes}),
        text,
    ))
}

/// `owner show`: where the key is, its fingerprint, and whether it is the project's.
fn show(
    ctx: &Ctx,
    home: &dyn Admin,
    secret_path: &Path,
    project_pub: Option<OwnerPub>,
) -> Result<Out> {
    let key = owner::load(&ctx.key).ok().flatten();
    let key_fp = key.as_ref().map(|k| k.public().fingerprint());
    let pub_fp = project_pub.as_ref().map(|p| p.fingerprint());
    let matches = match (&key, &project_pub) {
        (Some(k), Some(p)) => Some(k.public() == *p),
        _ => None,
    };
    let mut text = format!(
        "owner.pub: {}\nyour key: {} ({})",
        pub_fp.as_deref().unwrap_or("none (run `loopx owner init`)"),
        secret_path.display(),
        key_fp.as_deref().unwrap_or("not here")
    );
    match matches {
        Some(true) => text.push_str("\nyou hold this project's owner key"),
        Some(false) => text.push_str(
            "\nWARNING: your key is not the one in owner.pub (replaced?); run `loopx doctor`",
        ),
        None => {}
    }
    Ok(Out::new(
        "owner",
        json!({"public_key_file": home.place_of("owner.pub"), "fingerprint": pub_fp,
               "key_path": secret_path, "key_present": key.is_some(), "key_fingerprint": key_fp,
               "matches": matches}),
        text,
    ))
}

/// `owner devices`: the enrolled devices, as the owner's seal holds them.
fn devices(home: &dyn Admin) -> Result<Out> {
    let snap = home.load()?;
    let list = crate::flows::device::enrolled(&snap);
    let mut text = String::new();
    let mut rows = Vec::new();
    for (name, p) in &list {
        let fp = crate::kernel::device::DeviceKey::parse(&p.key)
            .map(|k| k.fingerprint())
            .unwrap_or_default();
        let label = p.label.as_deref().unwrap_or("");
        text.push_str(&format!(
            "{name}  {fp}  enrolled {}  {}\n",
            p.enrolled_at,
            crate::text::escape(label)
        ));
        rows.push(json!({"name": name, "fingerprint": fp, "key": p.key,
                         "enrolled_at": p.enrolled_at, "label": p.label}));
    }
    if list.is_empty() {
        text.push_str("no devices; enroll a phone with `loopx web pair`\n");
    }
    Ok(
        Out::new("devices", json!(rows), text.trim_end().to_string())
            .noted(snap.owner_notes.clone()),
    )
}

/// `owner devices revoke NAME`: signed; the device's decisions count as pending from now on.
fn revoke(ctx: &Ctx, home: &dyn Admin, name: &str) -> Result<Out> {
    let p = crate::flows::device::revoke(home, ops::OWNER, name, ctx.now)?;
    Ok(Out::new(
        "device",
        json!({"name": name, "key": p.key, "revoked": true}),
        format!("revoked {name}: it decides nothing now, and its decisions count as pending"),
    ))
}
