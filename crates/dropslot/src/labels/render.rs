//! From stored rows to the label crate's plain data: who sends, who receives, what to scan.
//! Rendering itself is `dropslot_labels::render`, pure and deterministic.

use dropslot_labels::{DropOffLabel, Label, ParcelLabel, Party, PickUpLabel};

use dropslot_store::{
    LabelKind, LabelSource, StoredDropOffAddress as DropOffAddress, StoredPickUpAddress as PickUpAddress,
};

fn receiver(a: &DropOffAddress) -> Party {
    Party {
        name: a.person_name.clone().unwrap_or_default(),
        address: a.text.clone(),
        postal_code: a.postal_code.to_uppercase(),
        phone: a.person_phone.clone().unwrap_or_default(),
    }
}

/// The sender: the merchant's name and contact from the drop-off, at the pick-up address
/// unless the merchant gave a sender address.
fn sender(a: &DropOffAddress, pick_up: &PickUpAddress) -> Party {
    let name = a.sender_name.clone().or_else(|| a.sender_person_name.clone()).or_else(|| pick_up.person_name.clone());
    let (address, postal_code) = match &a.sender_address_text {
        Some(t) if !t.trim().is_empty() => (t.clone(), String::new()),
        _ => (pick_up.text.clone(), pick_up.postal_code.to_uppercase()),
    };
    Party {
        name: name.unwrap_or_default(),
        address,
        postal_code,
        phone: a.sender_person_phone.clone().or_else(|| pick_up.person_phone.clone()).unwrap_or_default(),
    }
}

/// The label for a source; an inconsistent source is an error (a logged 500), never a blank
/// or partial label.
pub fn label_for(source: &LabelSource, base_url: &str) -> Result<Label, &'static str> {
    let pick_up = &source.pick_up_address;
    let drop_off = || source.drop_offs.get(source.drop_off_index).ok_or("label source: drop-off index out of range");
    match source.kind {
        LabelKind::PickUp => {
            let mut by_size: Vec<(String, u32)> = Vec::new();
            for size in source.drop_offs.iter().flat_map(|d| d.parcel_sizes.iter()) {
                match by_size.iter_mut().find(|(s, _)| s == size) {
                    Some((_, n)) => *n += 1,
                    None => by_size.push((size.clone(), 1)),
                }
            }
            let sender_name = source.drop_offs.first().map(|d| sender(&d.address, pick_up).name);
            Ok(Label::PickUp(PickUpLabel {
                pick_up_code: source.pick_up_unique_id.clone(),
                address: Party {
                    name: sender_name.unwrap_or_default(),
                    address: pick_up.text.clone(),
                    postal_code: pick_up.postal_code.to_uppercase(),
                    phone: pick_up.person_phone.clone().unwrap_or_default(),
                },
                scheduled_date: source.pick_up_date.clone(),
                time_slot: source.pick_up_slot_name.clone(),
                parcels_by_size: by_size,
                drop_off_count: source.drop_offs.len() as u32,
            }))
        }
        LabelKind::DropOff => {
            let d = drop_off()?;
            let a = &d.address;
            Ok(Label::DropOff(DropOffLabel {
                tracking_code: d.tracking_code.clone(),
                tracking_url: super::tracking_url(base_url, &d.tracking_code),
                sender: sender(a, pick_up),
                receiver: receiver(a),
                scheduled_date: d.scheduled_date.clone(),
                time_slot: d.slot_name.clone(),
                zone_code: d.zone_code.clone(),
                warehouse_code: d.warehouse.clone(),
                parcel_count: d.parcel_sizes.len() as u32,
            }))
        }
        LabelKind::Parcel => {
            let d = drop_off()?;
            let p = source.parcel.as_ref().ok_or("label source: parcel label without its parcel")?;
            let a = &d.address;
            Ok(Label::Parcel(ParcelLabel {
                sender: sender(a, pick_up),
                receiver: receiver(a),
                scheduled_date: d.scheduled_date.clone(),
                time_slot: d.slot_name.clone(),
                zone_code: d.zone_code.clone(),
                warehouse_code: d.warehouse.clone(),
                index: p.index,
                count: p.count,
                size_code: p.size_code.clone(),
                // The client's own code when given, so its barcode is the one on the box.
                barcode: p.custom_code.clone().unwrap_or_else(|| p.pick_up_code.clone()),
                tracking_code: d.tracking_code.clone(),
            }))
        }
    }
}
