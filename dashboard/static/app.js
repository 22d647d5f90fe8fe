// Progressive enhancements only: every page works without this file.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  // The database selector switches on change (its Go button stays for
  // browsers without JavaScript).
  document.querySelectorAll("select[data-autosubmit]").forEach(function (sel) {
    sel.addEventListener("change", function () { sel.form.submit(); });
  });
  // "Select all" in the dead letters list.
  document.querySelectorAll("input[data-select-all]").forEach(function (all) {
    all.hidden = false;
    all.addEventListener("change", function () {
      all.closest("form").querySelectorAll('input[type=checkbox][name=id], input[type=checkbox][name=idq]').forEach(function (box) {
        box.checked = all.checked;
      });
    });
  });
});
