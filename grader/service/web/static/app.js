// The web pages' only script (no build step, no inline script: the CSP allows this file alone).
// It adds five things to pages that work without it: times in the viewer's time zone, a live
// status that reloads the page when grading is done, drag-and-drop upload, sending the forms that
// hand a signed message back to the LMS (each also has a button), and a personal sign-in link's
// token (after "#", never sent to the server) moved into the sign-in form and off the address bar.
"use strict";

(function () {
  function localTimes(root) {
    var format = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
    root.querySelectorAll("time[datetime]").forEach(function (el) {
      var at = new Date(el.getAttribute("datetime"));
      if (!isNaN(at.getTime())) {
        el.textContent = format.format(at);
        el.title = el.getAttribute("datetime");
      }
    });
  }

  function followStatus(el) {
    if (el.dataset.final === "true" || !window.EventSource) return;
    var text = el.querySelector("[data-status-text]");
    var place = el.querySelector("[data-queue-place]");
    var source = new EventSource(el.dataset.events);
    source.addEventListener("status", function (event) {
      var view = JSON.parse(event.data);
      text.textContent = view.status.replace(/_/g, " ");
      text.className = "state state-" + view.status;
      if (place) place.textContent = view.queue_place ? " · number " + view.queue_place + " in the queue" : "";
      if (view.final) {
        source.close();
        window.location.reload();
      }
    });
    source.onerror = function () {
      // The server closes the stream once the status is final; a broken connection retries by itself.
      if (source.readyState === EventSource.CLOSED) window.setTimeout(function () { window.location.reload(); }, 2000);
    };
  }

  function problem(body, status) {
    if (body && typeof body.detail === "string") return body.detail;
    return "The upload was refused (HTTP " + status + "). Choose a .ipynb notebook and try again.";
  }

  function uploader(form) {
    var drop = form.querySelector("[data-drop]");
    var input = form.querySelector("input[type=file]");
    var out = form.querySelector("[data-upload-status]");

    function send(file) {
      var body = new FormData();
      body.append("csrf", form.elements.csrf.value);
      body.append("file", file, file.name);
      out.textContent = "Uploading " + file.name + "…";
      fetch(form.action, { method: "POST", body: body, credentials: "same-origin",
                           headers: { Accept: "application/json" } })
        .then(function (response) {
          return response.json().catch(function () { return null; }).then(function (json) {
            if (response.ok && json && json.url) {
              out.textContent = "Uploaded; opening its feedback page…";
              window.location.assign(json.url);
            } else {
              out.textContent = problem(json, response.status);
            }
          });
        })
        .catch(function () { out.textContent = "The server could not be reached; try again."; });
    }

    ["dragenter", "dragover"].forEach(function (name) {
      drop.addEventListener(name, function (event) { event.preventDefault(); drop.classList.add("over"); });
    });
    drop.addEventListener("dragleave", function () { drop.classList.remove("over"); });
    drop.addEventListener("drop", function (event) {
      event.preventDefault();
      drop.classList.remove("over");
      var files = event.dataTransfer && event.dataTransfer.files;
      if (files && files.length) send(files[0]);
    });
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      if (input.files.length) send(input.files[0]);
      else out.textContent = "Choose a notebook first.";
    });
  }

  function signInLink() {
    var found = /^#token=([A-Za-z0-9_-]{1,200})$/.exec(window.location.hash);
    var field = document.getElementById("token");
    if (!found || !field) return;
    field.value = found[1];
    window.history.replaceState(null, "", window.location.pathname + window.location.search);
    var button = field.form && field.form.querySelector("button[type=submit]");
    if (button) button.focus();  // the student still presses "Sign in": opening a link changes nothing
  }

  function start() {
    localTimes(document);
    signInLink();
    document.querySelectorAll("[data-print]").forEach(function (button) {
      button.addEventListener("click", function () { window.print(); });
    });
    document.querySelectorAll("[data-events]").forEach(followStatus);
    document.querySelectorAll("form[data-upload]").forEach(uploader);
    document.querySelectorAll("form[data-autosubmit]").forEach(function (form) { form.submit(); });
    if (document.querySelector("[data-lti-close]")) {  // LTI Dynamic Registration is done
      (window.opener || window.parent).postMessage({ subject: "org.imsglobal.lti.close" }, "*");
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
