//! Issue 47: a required field left out of a request body is a 422 at its path, on every
//! request type, never a 400 "wrong JSON type" (CONTRACT §2). The cases come from the OpenAPI
//! document: each operation's JSON body is its schema's example, sent once with each required
//! field (at any depth) removed in turn, so a new request type is covered when it is documented.

use serde_json::{Map, Value};

use crate::common::{ADMIN_TOKEN, TestServer};

/// The schema a (sub)schema stands for: `$ref` followed, the non-null side of a nullable
/// `oneOf`/`anyOf`, the parts of an `allOf` merged.
fn resolve(doc: &Value, schema: &Value) -> Value {
    if let Some(r) = schema["$ref"].as_str() {
        let name = r.rsplit('/').next().unwrap();
        return resolve(doc, &doc["components"]["schemas"][name]);
    }
    for alternatives in ["oneOf", "anyOf"] {
        if let Some(list) = schema[alternatives].as_array() {
            let real: Vec<&Value> = list.iter().filter(|s| s["type"] != "null").collect();
            if real.len() == 1 {
                return resolve(doc, real[0]);
            }
        }
    }
    if let Some(parts) = schema["allOf"].as_array() {
        let mut merged = Map::new();
        let mut required = Vec::new();
        for part in parts {
            let part = resolve(doc, part);
            merged.extend(part["properties"].as_object().cloned().unwrap_or_default());
            required.extend(part["required"].as_array().cloned().unwrap_or_default());
        }
        return serde_json::json!({"type": "object", "properties": merged, "required": required});
    }
    schema.clone()
}

/// Every required field's path in `example` (dotted, array items by index), with the schema
/// that says so: the fields of each object the example holds, at any depth.
fn required_paths(doc: &Value, schema: &Value, example: &Value, at: &str, out: &mut Vec<String>) {
    let schema = resolve(doc, schema);
    let join = |key: &str| if at.is_empty() { key.to_string() } else { format!("{at}.{key}") };
    match example {
        Value::Object(fields) => {
            for name in schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
                assert!(fields.contains_key(name), "{at}: the example leaves out the required field {name}");
                out.push(join(name));
            }
            for (name, value) in fields {
                if let Some(sub) = schema["properties"].get(name) {
                    required_paths(doc, sub, value, &join(name), out);
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                required_paths(doc, &schema["items"], item, &join(&i.to_string()), out);
            }
        }
        _ => {}
    }
}

/// `body` without the field at `path`.
fn without(body: &Value, path: &str) -> Value {
    let mut body = body.clone();
    let (parent, field) = path.rsplit_once('.').unwrap_or(("", path));
    let mut at = &mut body;
    for seg in parent.split('.').filter(|s| !s.is_empty()) {
        at = match at {
            Value::Array(items) => &mut items[seg.parse::<usize>().unwrap()],
            other => &mut other[seg],
        };
    }
    at.as_object_mut().unwrap().remove(field).expect("the field is in the body");
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_required_field_left_out_is_a_422_at_its_path() {
    let s = TestServer::start().await;
    let (_, test, _, ops) = s.new_client("Left Out Ltd").await;
    let operator = crate::driver_api::operator(&s).await;
    let (_, driver) = crate::driver_api::driver(&s, &operator, "Rae Quired").await;
    let token_of = |scheme: &str| match scheme {
        "client_token" => test.clone(),
        "ops_token" => ops.clone(),
        "operator_token" => operator.clone(),
        "driver_token" => driver.clone(),
        "admin_token" => ADMIN_TOKEN.to_string(),
        other => panic!("a security scheme this test does not know: {other}"),
    };
    let doc: Value = serde_json::from_str(&dropslot::openapi::JSON).unwrap();
    let (mut types, mut cases, mut wrong) = (0, 0, Vec::new());
    for (template, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let Some(content) = op["requestBody"]["content"].get("application/json") else { continue };
            let schema = resolve(&doc, &content["schema"]);
            let id = op["operationId"].as_str().unwrap();
            let example = content.get("example").unwrap_or(&schema["example"]);
            if !example.is_object() {
                // Only a body whose every field is optional may go without an example.
                assert!(
                    schema["required"].as_array().is_none_or(Vec::is_empty),
                    "{id}: its body's schema has no example"
                );
                continue;
            }
            let mut paths = Vec::new();
            required_paths(&doc, &content["schema"], example, "", &mut paths);
            types += 1;
            let mut path = template.clone();
            let mut headers = Vec::new();
            for p in op["parameters"].as_array().into_iter().flatten() {
                let name = p["name"].as_str().unwrap();
                match p["in"].as_str().unwrap() {
                    "path" => path = path.replace(&format!("{{{name}}}"), &crate::openapi::plausible(p)),
                    "header" if p["required"] == true => headers.push(name.to_string()),
                    _ => {}
                }
            }
            let scheme = op["security"][0].as_object().and_then(|m| m.keys().next().cloned());
            for field in &paths {
                cases += 1;
                let method = reqwest::Method::from_bytes(method.to_ascii_uppercase().as_bytes()).unwrap();
                let mut req = s.http.request(method, format!("{}{path}", s.base)).json(&without(example, field));
                for h in &headers {
                    req = req.header(h.as_str(), format!("left-out-{cases}"));
                }
                if let Some(scheme) = &scheme {
                    req = req.bearer_auth(token_of(scheme));
                }
                let r = s.send(req).await;
                // At the field's path; an object left out may be named by its own required
                // fields instead (`vehicle.name`, `vehicle.capacity_kg`, …).
                let inside = format!("{field}.");
                let named = r.body["errors"].as_object().is_some_and(|errors| {
                    errors.iter().any(|(at, messages)| {
                        (at == field || at.starts_with(&inside))
                            && messages
                                .as_array()
                                .is_some_and(|m| m.iter().any(|m| m.as_str().is_some_and(|m| m.contains("required"))))
                    })
                });
                let agrees = r.body["message"] == "The given data was invalid.";
                if r.status != 422 || !named || !agrees {
                    wrong.push(format!("{id} without {field}: {} {}", r.status, r.body));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "a required field left out is not a 422 naming it:\n{}", wrong.join("\n"));
    assert!(types >= 18 && cases >= 60, "every request type is tried: {types} types, {cases} cases");
}
