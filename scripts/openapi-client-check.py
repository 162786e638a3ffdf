#!/usr/bin/env python3
"""Drives a running dropslot through a client generated from docs/openapi.json by
openapi-python-client (PyPI): preview, a synchronous order and a shipment read, each answer
parsed into the generated models. Run by the end-to-end test `openapi::a_generated_python_client_works_end_to_end`.

argv: the generated package's parent directory, the package name, the base URL, a token.
stdout: one JSON object of what came back (model names and values), for the test to check.
A request that fails or an answer that does not parse into its model exits non-zero.
"""
import importlib
import json
import sys

parent, package, base_url, token = sys.argv[1:5]
sys.path.insert(0, parent)
client_mod = importlib.import_module(package)
models = importlib.import_module(package + ".models")
preview = importlib.import_module(package + ".api.orders.preview")
create_order = importlib.import_module(package + ".api.orders.create_order")
get_shipment = importlib.import_module(package + ".api.orders.get_shipment")

client = client_mod.AuthenticatedClient(base_url=base_url, token=token, raise_on_unexpected_status=True)
payload = models.RequestPayload.from_dict(
    {
        "pick_up_address": {"text": "100 King St W, Toronto, ON M5X 1A9"},
        "drop_offs": [
            {
                "address": {
                    "text": "290 Bremner Blvd, Toronto, ON M5V 3L9",
                    "person_name": "Jane Doe",
                    "person_phone": "+1 416 555 0100",
                },
                "parcels": [{"unit": "g", "values": 500}],
            }
        ],
    }
)

with client as c:
    p = preview.sync(client=c, body=payload)
    o = create_order.sync(client=c, body=payload)
    tracking = o.object_.shipments[0].drop_off_shipment.unique_id
    s = get_shipment.sync(client=c, unique_id=tracking)

json.dump(
    {
        "preview_model": type(p).__name__,
        "preview_object_model": type(p.object_).__name__,
        "price_with_tax": p.object_.price_with_tax,
        "order_model": type(o).__name__,
        "order_object_model": type(o.object_).__name__,
        "order_unique_id": o.object_.unique_id,
        "tracking_code": tracking,
        "shipment_model": type(s).__name__,
        "shipment_status": str(s.object_.status.value if hasattr(s.object_.status, "value") else s.object_.status),
        "shipment_tracking_code": s.object_.drop_off_shipment.unique_id,
        "models": sorted(name for name in dir(models) if name[:1].isupper()),
    },
    sys.stdout,
)
