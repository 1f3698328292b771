// certify-attention service: the submit form (token header, live progress) and the job page.
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

  function esc(s) {
    return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));
  }

  function verificationHtml(v, mode) {
    let h = '<p><span class="badge ' + (v.exit_code === 0 ? "proved" : (v.exit_code === 4 ? "assumed" : "refuted")) +
      '" id="verify-exit">certify verify: exit ' + v.exit_code + '</span> <span id="verify-meaning">' + esc(v.exit_meaning) + "</span></p>";
    h += '<p>Mode: <span id="verify-mode">' + esc(mode) + "</span>. " + v.counts.proved + " proved, " + v.counts.refuted +
      " refuted, " + v.counts.unknown + " unknown claim(s) re-derived; " + v.counts.failed + " failed.</p>";
    const open = v.open_assumptions || [];
    if (open.length) {
      // exit 4 means "holds under these": name every one of them
      h += '<p>Holds only under these assumptions (accept one with <code>certify verify --assume NAME</code>, ' +
        'or re-derive it):</p><ul id="verify-assumptions">' + open.map((a) => "<li>" + esc(a) + "</li>").join("") + "</ul>";
    } else if (v.exit_code === 4) {
      h += '<p id="verify-assumptions" class="error">exit 4 names no assumption: treat it as a failure.</p>';
    }
    h += "<ul>";
    v.claims.forEach((c) => {
      // verdict first, as certify verify prints it: never a mark of approval before a false sentence
      h += '<li class="' + (c.holds ? "holds" : "fails") + '">' + esc(c.line);
      if (c.problems.length) h += "<ul>" + c.problems.map((p) => "<li>" + esc(p) + "</li>").join("") + "</ul>";
      h += "</li>";
    });
    return h + "</ul>";
  }

  const job = $("job");
  if (job) {
    // one poll every POLL_MS while the job lives; a refusal (429 with
    // Retry-After) or an error waits and polls again, showing the last known
    // status: the page never shows a status it was not given
    const POLL_MS = 2000;
    const id = job.dataset.id;
    const t0 = Date.now();
    let width = 5;
    async function poll() {
      let resp, j;
      try {
        resp = await fetch("/api/jobs/" + id);
        j = resp.ok ? await resp.json() : null;
      } catch (e) {
        resp = null;
      }
      if (!j || typeof j.status !== "string") {
        const wait = resp ? (parseInt(resp.headers.get("Retry-After"), 10) || 5) : 5;
        $("job-stage").textContent = "(status not available" + (resp ? " (" + resp.status + ")" : "") +
          "; asking again in " + wait + " s)";
        setTimeout(poll, wait * 1000);
        return;
      }
      $("job-status").textContent = j.status;
      $("job-status").className = "status " + j.status;
      $("job-stage").textContent = j.stage ? "(" + j.stage + ")" : "";
      $("job-elapsed").textContent = j.status === "running" || j.status === "queued" ? Math.round((Date.now() - t0) / 1000) + " s" : "";
      $("job-reason").textContent = j.reason || "";
      if (j.status === "queued" || j.status === "running") {
        width = Math.min(90, width + (j.status === "running" ? 6 : 1));
        $("job-bar").style.width = width + "%";
        setTimeout(poll, POLL_MS);
        return;
      }
      $("job-bar").style.width = "100%";
      if (j.status === "done" && j.cert_sha256) {
        window.location.href = "/certificates/" + j.cert_sha256;
      } else if (j.status === "done" && j.result && j.result.verification) {
        $("job-result").innerHTML = "<h2>Verification</h2>" + verificationHtml(j.result.verification, j.result.verify_mode);
      }
    }
    poll();
  }
})();
