/*! dropslot slot picker: renders the bookable delivery slots of an address into a merchant's
 * checkout page and hands the choice to the page's form as `scheduled_date` and
 * `time_slot_code`. No dependencies. Give it a publishable key (pk_test_…, pk_live_…), never
 * a secret token. Documented in docs/api.md ("The slot picker"). */
(function () {
  "use strict";
  var API = "/scheduled-service/api/v1";
  var SECRET = "dropslot: this is a secret token (ds_…). Never put it in a web page: anyone who opens the page can read it and act for your account. Revoke it, and give the slot picker a publishable key (pk_test_… or pk_live_…) instead.";
  var NO_KEY = "dropslot: the slot picker needs a publishable key (pk_test_… or pk_live_…).";
  var script = document.currentScript;
  var base = script && script.src ? new URL(script.src).origin : "";
  var count = 0;

  /* The key's form, checked before any request: a secret token is refused with why. */
  function checkKey(key) {
    key = String(key || "");
    if (/^pk_(test|live)_[A-Za-z0-9_-]+$/.test(key)) return key;
    if (/^(ds|sk)_/.test(key)) throw new Error(SECRET);
    throw new Error(NO_KEY);
  }

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in attrs) if (attrs[k] != null) e.setAttribute(k, attrs[k]);
    if (text != null) e.textContent = text;
    return e;
  }

  function css() {
    if (document.getElementById("dropslot-slots-style")) return;
    var s = el("style", { id: "dropslot-slots-style" });
    s.textContent =
      ".dropslot-slots{border:1px solid currentColor;border-radius:6px;padding:.5em 1em 1em;margin:1em 0}" +
      ".dropslot-slots legend{font-weight:bold;padding:0 .25em}" +
      ".dropslot-day{border:0;padding:0;margin:.75em 0 0}" +
      ".dropslot-day legend{font-weight:bold;padding:0;font-size:.95em}" +
      ".dropslot-slot{display:flex;align-items:center;gap:.5em;padding:.3em 0;cursor:pointer}" +
      ".dropslot-slot input{margin:0;width:1.1em;height:1.1em}" +
      ".dropslot-status:empty{display:none}";
    (document.head || document.documentElement).appendChild(s);
  }

  function day(date) {
    var p = date.split("-");
    var d = new Date(Date.UTC(+p[0], +p[1] - 1, +p[2]));
    try {
      return new Intl.DateTimeFormat(document.documentElement.lang || undefined, {
        weekday: "long", day: "numeric", month: "long", timeZone: "UTC"
      }).format(d);
    } catch (e) {
      return date;
    }
  }

  /* "2026-11-23T14:00:00-05:00" → "14:00": the slot's own local time, as the courier sells it. */
  function hhmm(iso) {
    return String(iso || "").slice(11, 16);
  }

  /* The form field named `name`: the page's own, or a hidden one made inside the picker. */
  function field(form, holder, name) {
    var found = form && form.elements ? form.elements.namedItem(name) : null;
    if (found && found.tagName) return found;
    var made = el("input", { type: "hidden", name: name });
    holder.appendChild(made);
    return made;
  }

  function mount(root, options) {
    if (typeof root === "string") root = document.querySelector(root);
    if (!root) throw new Error("dropslot: no element to render the slot picker into.");
    options = options || {};
    var key = checkKey(options.key);
    var api = String(options.api || base).replace(/\/+$/, "");
    if (!api) throw new Error("dropslot: give the picker the dropslot server's address (api).");
    var n = ++count;
    var radioName = "dropslot_slot" + (n > 1 ? n : "");
    var form = options.form ? document.querySelector(options.form) : root.closest("form");
    var addressInput = options.addressInput ? document.querySelector(options.addressInput) : null;
    css();
    root.textContent = "";
    var set = el("fieldset", { "class": "dropslot-slots" });
    set.appendChild(el("legend", {}, options.legend || "Delivery time"));
    var status = el("p", { "class": "dropslot-status", role: "status", "aria-live": "polite" });
    var list = el("div", { "class": "dropslot-list" });
    set.appendChild(status);
    set.appendChild(list);
    root.appendChild(set);
    var dateField = field(form, root, options.dateField || "scheduled_date");
    var slotField = field(form, root, options.slotField || "time_slot_code");
    var seq = 0;
    var timer = null;
    var last = null;

    function choose(slot) {
      dateField.value = slot ? slot.scheduled_date : "";
      slotField.value = slot ? slot.time_slot_code : "";
      var detail = slot ? { scheduled_date: slot.scheduled_date, time_slot_code: slot.time_slot_code, slot: slot } : null;
      root.dispatchEvent(new CustomEvent("dropslot:slot", { bubbles: true, detail: detail }));
      if (typeof options.onChange === "function") options.onChange(detail);
    }

    function render(slots) {
      list.textContent = "";
      var kept = null;
      var days = {};
      var order = [];
      slots.forEach(function (s) {
        if (!days[s.scheduled_date]) { days[s.scheduled_date] = []; order.push(s.scheduled_date); }
        days[s.scheduled_date].push(s);
      });
      order.forEach(function (date) {
        var group = el("fieldset", { "class": "dropslot-day" });
        group.appendChild(el("legend", {}, day(date)));
        days[date].forEach(function (s) {
          var id = radioName + "_" + s.scheduled_date + "_" + s.time_slot_code.replace(/[^A-Za-z0-9_-]/g, "_");
          var input = el("input", { type: "radio", name: radioName, id: id, value: s.scheduled_date + "|" + s.time_slot_code });
          if (options.required) input.required = true;
          if (s.scheduled_date === dateField.value && s.time_slot_code === slotField.value) { input.checked = true; kept = s; }
          input.addEventListener("change", function () { if (input.checked) choose(s); });
          var label = el("label", { "for": id, "class": "dropslot-slot" });
          label.appendChild(input);
          var start = hhmm(s.time_slot_datetime_start);
          var text = start + "–" + hhmm(s.time_slot_datetime_end);
          if (s.name && s.name.indexOf(start) < 0) text += " (" + s.name + ")";
          if (s.remaining && s.remaining.stops != null && s.remaining.stops <= 3) text += " · " + s.remaining.stops + " left";
          label.appendChild(el("span", {}, text));
          group.appendChild(label);
        });
        list.appendChild(group);
      });
      if (!kept && (dateField.value || slotField.value)) choose(null);
      status.textContent = slots.length ? "" : "No delivery time is available for this address in the coming days.";
    }

    function load(text, force) {
      text = String(text || "").trim();
      // The same address again (its `change` after the typing that loaded it): nothing to do.
      if (!force && text === last) return Promise.resolve(null);
      last = text;
      var mine = ++seq;
      if (!text) {
        list.textContent = "";
        status.textContent = "Enter the delivery address to see the delivery times.";
        return Promise.resolve([]);
      }
      status.textContent = "Loading delivery times…";
      var url = api + API + "/slots?text=" + encodeURIComponent(text);
      if (options.days) url += "&days=" + encodeURIComponent(options.days);
      if (options.from) url += "&from=" + encodeURIComponent(options.from);
      return fetch(url, { headers: { Authorization: "Bearer " + key }, credentials: "omit", mode: "cors" })
        .then(function (res) {
          return res.json().then(function (body) { return { ok: res.ok, body: body }; });
        })
        .then(function (r) {
          if (mine !== seq) return [];
          if (!r.ok) {
            var errs = r.body && r.body.errors ? Object.keys(r.body.errors).map(function (k) { return r.body.errors[k][0]; }) : [];
            throw new Error(errs[0] || (r.body && r.body.message) || "The delivery times could not be loaded.");
          }
          render(r.body.object || []);
          return r.body.object || [];
        })
        .catch(function (e) {
          if (mine !== seq) return [];
          last = null;
          list.textContent = "";
          if (dateField.value || slotField.value) choose(null);
          status.textContent = e instanceof TypeError ? "The delivery times could not be loaded." : e.message;
          return [];
        });
    }

    function current() {
      return addressInput ? addressInput.value : options.address;
    }

    if (addressInput) {
      addressInput.addEventListener("change", function () { clearTimeout(timer); load(current()); });
      addressInput.addEventListener("input", function () {
        clearTimeout(timer);
        timer = setTimeout(function () { load(current()); }, 600);
      });
    }
    var ready = load(current());
    return {
      refresh: function (address) {
        if (address != null) options.address = address;
        return load(current(), true);
      },
      ready: ready
    };
  }

  /* Every `[data-dropslot-slots]` element is mounted with its data attributes. */
  function auto() {
    var nodes = document.querySelectorAll("[data-dropslot-slots]");
    Array.prototype.forEach.call(nodes, function (node) {
      if (node.dropslot) return;
      var d = node.dataset;
      try {
        node.dropslot = mount(node, {
          key: d.key, api: d.api, address: d.address, addressInput: d.addressInput, form: d.form,
          dateField: d.dateField, slotField: d.slotField, days: d.days, from: d.from, legend: d.legend,
          required: d.required != null
        });
      } catch (e) {
        node.textContent = "";
        node.appendChild(el("p", { role: "alert", "class": "dropslot-error" }, e.message));
        node.dropslot = { error: e.message };
        if (window.console) console.error(e.message);
      }
    });
  }

  window.DropslotSlots = { mount: mount, checkKey: checkKey };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", auto);
  else auto();
})();
