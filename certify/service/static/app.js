// certify-attention service: the submit form (token header) and the job page's refresh.
(function () {
  "use strict";
  const $ = (id) => document.getElementById(id);

  function showFieldsets() {
    const cmd = $("command").value;
    document.querySelectorAll("[data-for]").forEach((el) => {
      const on = el.dataset.for.split(" ").includes(cmd);
      el.hidden = !on;
      if (el.tagName === "FIELDSET") el.disabled = !on;   // disabled fields are not sent
    });
  }

  async function send(url, form, headers) {
    const status = $("submit-status");
    status.textContent = "uploading...";
    status.className = "";
    let resp, body;
    try {
      resp = await fetch(url, { method: "POST", body: new FormData(form), headers: headers });
      body = await resp.json();
    } catch (e) {
      status.textContent = "the server did not answer: " + e;
      status.className = "error";
      return;
    }
    if (resp.status !== 201) {
      const why = { 401: "refused: the token is missing or wrong", 413: "refused: the file is too large",
                    422: "refused", 429: "refused: too many requests, try again later",
                    507: "refused: the server's storage is full" };
      status.textContent = (why[resp.status] || ("refused (" + resp.status + ")")) + ": " + (body.detail || "");
      status.className = "error";
      return;
    }
    window.location.href = body.page;
  }

  const form = $("submit-form");
  if (form) {
    const saved = window.localStorage.getItem("certify-token");
    if (saved) $("token").value = saved;
    $("command").addEventListener("change", showFieldsets);
    showFieldsets();
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const token = $("token").value.trim();
      window.localStorage.setItem("certify-token", token);
      send("/api/jobs", form, { Authorization: "Bearer " + token });
    });
  }

  const vform = $("verify-form");
  if (vform) {
    vform.addEventListener("submit", (ev) => { ev.preventDefault(); send("/api/verify", vform, {}); });
  }

  const job = $("job");
  if (job && job.dataset.live === "yes") {
    // the server renders the job's state (/jobs/ID/state, the same fragment as
    // this page's): the script only fetches it again every POLL_MS and puts it
    // in place, so it never shows anything the server did not render. A
    // refusal (429 with Retry-After) or an error keeps the last state shown
    // and asks again later.
    const POLL_MS = 2000;
    const id = job.dataset.id;
    const note = $("job-poll");
    async function poll() {
      let resp = null, html = null;
      try {
        resp = await fetch("/jobs/" + id + "/state", { headers: { Accept: "text/html" } });
        html = resp.ok ? await resp.text() : null;
      } catch (e) {
        resp = null;
      }
      if (html === null) {
        const wait = resp ? (parseInt(resp.headers.get("Retry-After"), 10) || 5) : 5;
        note.textContent = "status not available" + (resp ? " (" + resp.status + ")" : "") +
          "; asking again in " + wait + " s (the state above is the last one received)";
        setTimeout(poll, wait * 1000);
        return;
      }
      job.innerHTML = html;
      const status = $("job-status") ? $("job-status").textContent.trim() : "";
      if (status === "queued" || status === "running") {
        note.textContent = "This page shows the job's state as the server last recorded it, and refreshes it every few seconds.";
        setTimeout(poll, POLL_MS);
        return;
      }
      note.textContent = "";
      const cert = $("job-certificate");
      if (status === "done" && cert) window.location.href = cert.getAttribute("href");
    }
    setTimeout(poll, POLL_MS);
  }
})();
