//! Devices in the seal: which count on a load, and what an owner change's enroll and revoke
//! lines change.

use super::Seal;

impl Seal {
    /// Applies an owner change's device enrollments (`device.enroll` carries the key in its
    /// data) and revocations.
    pub fn apply_device_events(&mut self, events: &[crate::kernel::model::EventDraft]) {
        use crate::kernel::action::Action;
        for e in events {
            match e.action {
                Action::DeviceEnroll => {
                    let key = e.data.get("key").and_then(|v| v.as_str());
                    let key = key.and_then(|k| crate::kernel::device::DeviceKey::parse(k).ok());
                    if let Some(k) = key
                        && crate::kernel::device::check_name(&e.target).is_ok()
                        && !self.revoked.contains(&k.hex())
                    {
                        self.devices.insert(e.target.clone(), k.hex());
                    }
                }
                Action::DeviceRevoke => {
                    if let Some(k) = self.devices.remove(&e.target) {
                        self.revoked.insert(k);
                    }
                }
                _ => {}
            }
        }
    }
}

/// The devices that count are the sealed ones, with their sealed keys: one added or changed by
/// hand is not enrolled, and one removed by hand still is.
pub(super) fn apply(cfg: &mut crate::kernel::Config, seal: &Seal, notes: &mut Vec<String>) {
    cfg.devices.retain(|name, p| {
        let ok = seal.devices.get(name) == Some(&p.key);
        if !ok {
            notes.push(format!(
                "loopx.toml's device {name} is not one the owner enrolled: it decides nothing (`loopx web pair` enrolls a phone; `owner seal --adopt` does not)"
            ));
        }
        ok
    });
    for (name, key) in &seal.devices {
        if !cfg.devices.contains_key(name) {
            notes.push(format!(
                "device {name} is enrolled in the owner's seal but not in loopx.toml: it still counts"
            ));
            let p = crate::kernel::model::DevicePolicy {
                key: key.clone(),
                enrolled_at: crate::kernel::Ts(0),
                label: None,
                extra: Default::default(),
            };
            cfg.devices.insert(name.clone(), p);
        }
    }
}
