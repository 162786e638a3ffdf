//! Schema names a person would write (issue 27). utoipa names a generic instance after its
//! parts (`Envelope_PreviewObject`) and inlines its argument, so generated clients got models
//! such as `EnvelopePreviewObjectObject`. Here every envelope becomes `<Name>Response`, its
//! `object` a reference to `<Name>`, the wire structs' `…Object` names plain nouns, and a
//! success envelope loses the `errors` field it never carries.

use utoipa::openapi::{OpenApi, Ref, RefOr, Schema};

/// Component schemas renamed: (name in the code, name in the document).
const RENAMED: &[(&str, &str)] = &[
    ("PreviewObject", "Preview"),
    ("OrderObject", "Order"),
    ("RequestObject", "OrderRequest"),
    ("ShipmentObject", "Shipment"),
    ("DropOffShipmentObject", "DropOffShipment"),
    ("PickUpShipmentObject", "PickUpShipment"),
    ("ParcelObject", "Parcel"),
];

/// A component's name in the document.
fn renamed(name: &str) -> &str {
    RENAMED.iter().find(|(old, _)| *old == name).map_or(name, |(_, new)| new)
}

/// Renames the document's component schemas; the (old, new) pairs, for its references.
pub fn readable(doc: &mut OpenApi) -> Vec<(String, String)> {
    let Some(components) = doc.components.as_mut() else { return Vec::new() };
    let schemas = &mut components.schemas;
    let mut renames = Vec::new();
    let envelopes: Vec<String> = schemas.keys().filter(|k| k.starts_with("Envelope_")).cloned().collect();
    for name in envelopes {
        let inner = &name["Envelope_".len()..];
        let target = renamed(inner).to_string();
        let response = format!("{}Response", target.trim_end_matches("Object"));
        let Some(mut schema) = schemas.remove(&name) else { continue };
        if let RefOr::T(Schema::Object(envelope)) = &mut schema {
            // A success never carries `errors`: only the error envelope has it.
            envelope.properties.shift_remove("errors");
            envelope.required.retain(|r| r != "errors");
            // The argument, inlined by utoipa, is the component itself: refer to it.
            let same =
                |a: &RefOr<Schema>, b: &RefOr<Schema>| serde_json::to_value(a).ok() == serde_json::to_value(b).ok();
            if let (Some(inline), Some(component)) = (envelope.properties.get("object"), schemas.get(inner)) {
                if same(inline, component) {
                    envelope.properties.insert("object".into(), RefOr::Ref(Ref::from_schema_name(target.as_str())));
                }
            }
        }
        schemas.insert(response.clone(), schema);
        renames.push((name, response));
    }
    for (old, new) in RENAMED {
        if let Some(schema) = schemas.remove(*old) {
            schemas.insert((*new).to_string(), schema);
            renames.push(((*old).to_string(), (*new).to_string()));
        }
    }
    renames
}

/// The document's JSON text with every reference to a renamed schema following it.
pub fn retarget(mut text: String, renames: &[(String, String)]) -> String {
    for (old, new) in renames {
        text = text.replace(&format!("\"#/components/schemas/{old}\""), &format!("\"#/components/schemas/{new}\""));
    }
    text
}

#[cfg(test)]
mod tests {
    /// Every envelope became a `…Response` whose object refers to a named schema, no name is
    /// utoipa's generic `A_B`, and no reference points at a name that is gone.
    #[test]
    fn the_document_names_every_schema_plainly() {
        let text = super::super::JSON.as_str();
        let doc: serde_json::Value = serde_json::from_str(text).unwrap();
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        assert!(schemas.contains_key("PreviewResponse") && schemas.contains_key("Order"), "{:?}", schemas.keys());
        for (name, schema) in schemas {
            assert!(!name.contains('_') && !name.ends_with("ObjectObject"), "{name}");
            if name.ends_with("Response") {
                assert!(
                    schema["properties"]["object"]["$ref"].is_string(),
                    "{name}: {}",
                    schema["properties"]["object"]
                );
                assert!(schema["properties"].get("errors").is_none(), "{name}");
            }
        }
        for (at, _) in text.match_indices("\"#/components/schemas/") {
            let name = text[at + 22..].split('"').next().unwrap();
            assert!(schemas.contains_key(name), "a reference to {name}, which is not a schema");
        }
    }
}
