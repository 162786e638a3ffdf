// A sign-in link (`/ops/sign-in#token=…`, printed by the first start of a new database)
// fills the form and sends it. The token travels in the URL's fragment, which no request
// line, proxy or log sees, and is taken out of the address bar before the form is sent.
(function () {
  "use strict";
  var m = /^#token=([A-Za-z0-9_.~-]{1,256})$/.exec(window.location.hash);
  if (!m) return;
  window.history.replaceState(null, "", window.location.pathname);
  var field = document.getElementById("token");
  var form = document.getElementById("sign-in");
  if (!field || !form) return;
  field.value = m[1];
  form.submit();
})();
