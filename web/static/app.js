// qshare's dashboard: four read-only views (Shares, Queue, Jobs, Events) and
// a job page, each refreshed every few seconds without reloading the page.
// It reads the AWS Batch JSON API (POST /v1/<operation>, Content-Type
// application/json) and qshare's read-only extensions under /qshare/v1/, all
// on the page's own origin. Text from the server is always set with
// textContent, never parsed as HTML.
//
// On a server with authentication (qshare serve --auth, which config.json
// says), the page asks for an access key of the server's auth file and signs
// every request with it, with AWS Signature Version 4 computed here by the
// browser's own crypto (crypto.subtle), as the AWS SDKs sign: the server
// checks the signature and the principal's policies as for any client. The
// key is kept in this tab's sessionStorage, sent nowhere, and forgotten on
// "sign out" or when the tab is closed.
"use strict";

const POLL_MS = 2000;
const main = document.getElementById("main");
const statusEl = document.getElementById("status");
let generation = 0; // bumps on every route change: a late answer is dropped
let timer = null;
let renders = 0;

// el builds an element: el("td", {class: "num"}, "1", child, ...).
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "style") for (const [p, x] of Object.entries(v)) e.style.setProperty(p, x); // CSSOM: the CSP allows no style attributes
    else e.setAttribute(k, String(v));
  }
  for (const k of kids.flat(Infinity)) {
    if (k === undefined || k === null) continue;
    e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return e;
}

class APIError extends Error {
  constructor(message, type) { super(message); this.type = type || ""; }
}

// ---- signing (AWS Signature Version 4) ----

const KEY_ITEM = "qshare.accessKey"; // sessionStorage: {id, secret}
let config = {auth: false, region: "us-east-1"};
const enc = new TextEncoder();

function hex(buf) { return Array.from(new Uint8Array(buf), b => b.toString(16).padStart(2, "0")).join(""); }
async function sha256hex(s) { return hex(await crypto.subtle.digest("SHA-256", enc.encode(s))); }
async function hmac(key, s) {
  const k = await crypto.subtle.importKey("raw", typeof key === "string" ? enc.encode(key) : key, {name: "HMAC", hash: "SHA-256"}, false, ["sign"]);
  return crypto.subtle.sign("HMAC", k, enc.encode(s));
}

// awsEscape percent-encodes every byte of s but A-Z a-z 0-9 - _ . ~ (and /
// when keepSlash), as SigV4's canonical request does.
function awsEscape(s, keepSlash) {
  let out = "";
  for (const b of enc.encode(s)) {
    const c = String.fromCharCode(b);
    if (/[A-Za-z0-9_.~-]/.test(c) || (keepSlash && c === "/")) out += c;
    else out += "%" + b.toString(16).toUpperCase().padStart(2, "0");
  }
  return out;
}

function storedKey() {
  try { return JSON.parse(sessionStorage.getItem(KEY_ITEM) || "null"); } catch (e) { return null; }
}

// signingKeys caches the key SigV4 derives from a secret, by day, region,
// service, key id and secret (a secret typed anew under the same id must
// not find the key of the one before).
const signingKeys = new Map();
async function signingKey(k, day, service) {
  const id = JSON.stringify([day, config.region, service, k.id, k.secret]);
  if (!signingKeys.has(id)) {
    const kDate = await hmac("AWS4" + k.secret, day);
    signingKeys.set(id, await hmac(await hmac(await hmac(kDate, config.region), service), "aws4_request"));
  }
  return signingKeys.get(id);
}

// signedHeaders returns the headers that sign a request of method to path
// (with its query) with body for service (batch unless named), by the key
// in this tab; {} without authentication.
async function signedHeaders(method, path, body, headers, service) {
  service = service || "batch";
  if (!config.auth) return headers;
  const k = storedKey();
  if (!k) throw new APIError("sign in with an access key of the server's auth file", "SignInRequired");
  const u = new URL(path, location.href);
  const amz = new Date().toISOString().replace(/[-:]/g, "").replace(/\.\d+Z$/, "Z");
  const day = amz.slice(0, 8);
  const query = [...u.searchParams.entries()].map(([n, v], i) => [n, v, i])
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[2] - b[2]))
    .map(([n, v]) => awsEscape(n) + "=" + awsEscape(v)).join("&");
  const h = {};
  for (const [n, v] of Object.entries(headers)) h[n.toLowerCase()] = v.trim();
  h["host"] = location.host;
  h["x-amz-date"] = amz;
  const names = Object.keys(h).sort();
  const canonical = [method, awsEscape(u.pathname, true), query, names.map(n => n + ":" + h[n] + "\n").join(""),
    names.join(";"), await sha256hex(body || "")].join("\n");
  const scope = day + "/" + config.region + "/" + service + "/aws4_request";
  const toSign = ["AWS4-HMAC-SHA256", amz, scope, await sha256hex(canonical)].join("\n");
  const sig = hex(await hmac(await signingKey(k, day, service), toSign));
  return Object.assign({}, headers, {"X-Amz-Date": amz,
    "Authorization": "AWS4-HMAC-SHA256 Credential=" + k.id + "/" + scope + ", SignedHeaders=" + names.join(";") + ", Signature=" + sig});
}

// request sends a same-origin request, signed when the server wants it.
async function request(method, path, body) {
  const headers = await signedHeaders(method, path, body, body === undefined ? {} : {"Content-Type": "application/json"});
  return fetch(path, {method, headers, body, credentials: "same-origin", cache: "no-store"});
}

async function call(op, body) {
  return answer(await request("POST", "/v1/" + op, JSON.stringify(body || {})), op);
}

// sagemaker calls an operation of the server's SageMaker endpoint
// (awsJson1_1, as the SageMaker SDK does), such as DescribeTrainingJob.
async function sagemaker(op, body) {
  const b = JSON.stringify(body || {});
  const headers = await signedHeaders("POST", "/", b, {"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": "SageMaker." + op}, "sagemaker");
  return answer(await fetch("/", {method: "POST", headers, body: b, credentials: "same-origin", cache: "no-store"}), op);
}

async function get(path) {
  return answer(await request("GET", path), path);
}

async function answer(r, what) {
  const text = await r.text();
  let v = null;
  try { v = JSON.parse(text); } catch (e) { /* not JSON */ }
  if (!r.ok) {
    const msg = v && v.message ? v.message : (text || r.statusText);
    throw new APIError(what + ": " + msg, r.headers.get("X-Amzn-ErrorType") || (v && v.__type) || "");
  }
  return v;
}

// The refusals that mean the key in this tab is missing, unknown or wrong:
// the page then asks for one.
const SIGN_IN_ERRORS = ["SignInRequired", "MissingAuthenticationTokenException", "UnrecognizedClientException", "InvalidSignatureException"];

// pages calls op until its nextToken runs out or max pages were read, and
// returns the concatenated lists under key.
async function pages(op, body, key, max) {
  let out = [], token;
  for (let i = 0; i < (max || 10); i++) {
    const b = Object.assign({}, body);
    if (token) b.nextToken = token;
    const v = await call(op, b);
    out = out.concat(v[key] || []);
    token = v.nextToken;
    if (!token) break;
  }
  return {items: out, more: !!token};
}

async function queueNames() {
  const {items} = await pages("describejobqueues", {}, "jobQueues", 10);
  return items.map(q => q.jobQueueName).sort();
}

function fmtTime(ms) {
  if (!ms) return "";
  const d = new Date(ms);
  return d.toLocaleTimeString([], {hour12: false}) + (Date.now() - ms > 86400e3 ? " " + d.toLocaleDateString() : "");
}

function ago(ms) {
  if (!ms) return "";
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 120) return s + " s";
  if (s < 7200) return Math.round(s / 60) + " min";
  return Math.round(s / 3600) + " h";
}

function statusBadge(s) { return el("span", {class: "status " + s}, s); }
function jobLink(id, name) { return el("a", {href: "#job/" + encodeURIComponent(id)}, name || id); }

// ---- Shares ----

// flows names the shares a capacity comes from or goes to, as qshare
// shares words it.
function flows(fs) {
  const name = f => (f.unowned || f.quotaShare === "(unowned)") ? "capacity no share owns" : f.quotaShare;
  if (!fs || fs.length === 0) return "";
  if (fs.length === 1) return name(fs[0]);
  const parts = fs.map(f => name(f) + " (" + f.quantity + ")");
  return parts.length === 2 ? parts.join(" and ") : parts.slice(0, -1).join(", ") + " and " + parts[parts.length - 1];
}

function lends(strategy) { return strategy === "LEND" || strategy === "LEND_AND_BORROW"; }

// describe says in words what a share's bar shows: the words of qshare shares.
function describe(c, strategy) {
  const parts = [];
  if (c.own > 0 || (c.owned > 0 && c.lent === 0 && c.idle === 0)) parts.push(c.own + " in use");
  if (c.borrowed > 0) parts.push(c.borrowed + " borrowed from " + flows(c.borrowedFrom));
  if (c.lent > 0) parts.push(c.lent + " lent to " + flows(c.lentTo));
  if (c.idle > 0) parts.push(c.idle + " idle, " + (lends(strategy) ? "lendable" : "reserved"));
  if (c.owned === 0) parts.push("owns none");
  return parts.join(" · ");
}

function flowAttr(fs) { return (fs || []).map(f => (f.unowned ? "(unowned)" : f.quotaShare) + "=" + f.quantity).join(","); }

const LEGEND = [["own", "own capacity in use"], ["borrowed", "borrowed"], ["lent", "lent to another share"],
  ["idle", "idle, lendable"], ["reserved", "idle, kept (RESERVE)"]];

function legend() {
  return el("div", {class: "legend"}, LEGEND.map(([k, label]) => el("span", {style: {"--c": "var(--" + k + ")"}, "data-legend": k}, label)));
}

async function viewShares() {
  const v = await get("/qshare/v1/lending");
  const frag = [legend()];
  if (!v.jobQueues || v.jobQueues.length === 0) {
    frag.push(el("p", {class: "note"}, "No job queue has a quota-share policy yet."));
  }
  for (const q of v.jobQueues || []) {
    frag.push(el("h2", {}, "job queue " + q.jobQueue + " · service environment " + q.serviceEnvironment));
    // The environment's executor (docs/executors.md), and whether its
    // service answers: while it does not, the environment's jobs are held.
    if (q.executor) {
      frag.push(el("div", {class: "envexec", "data-env": q.serviceEnvironment, "data-executor": q.executor, "data-health": q.executorHealth ? "down" : "up"},
        "executor " + q.executor + " · ", el("span", {class: "status " + (q.executorHealth ? "FAILED" : "SUCCEEDED")}, q.executorHealth ? "down" : "up"),
        q.executorHealth ? " " + q.executorHealth : ""));
    }
    frag.push(el("div", {class: "envcap"}, (q.capacity || []).map(c =>
      c.capacityUnit + ": " + c.inUse + " of " + c.maxCapacity + " in use" + (c.unowned > 0 ? " (" + c.unowned + " owned by no share)" : "")).join(" · ")));
    // Bars of one instance type share one scale: the widest owned+borrowed.
    const scale = {};
    for (const s of q.quotaShares || []) for (const c of s.capacity || []) {
      scale[c.capacityUnit] = Math.max(scale[c.capacityUnit] || 1, c.owned + c.borrowed);
    }
    const rows = [];
    for (const s of q.quotaShares || []) {
      const caps = s.capacity || [];
      caps.forEach((c, i) => {
        const reserved = lends(s.strategy) ? 0 : c.idle;
        const idle = c.idle - reserved;
        const segs = [["own", c.own], ["lent", c.lent], ["idle", idle], ["reserved", reserved], ["borrowed", c.borrowed]]
          .filter(([, n]) => n > 0)
          .map(([k, n]) => el("div", {class: "seg " + k, style: {flex: n + " 0 0"}, title: n + " " + k, "data-seg": k, "data-n": n}));
        const width = Math.max(4, Math.round(100 * (c.owned + c.borrowed) / scale[c.capacityUnit]));
        rows.push(el("tr", {class: "share-row", "data-queue": q.jobQueue, "data-share": s.quotaShareName, "data-type": c.capacityUnit,
          "data-strategy": s.strategy, "data-owned": c.owned, "data-own": c.own, "data-borrowed": c.borrowed, "data-lent": c.lent,
          "data-idle": idle, "data-reserved": reserved, "data-borrowed-from": flowAttr(c.borrowedFrom), "data-lent-to": flowAttr(c.lentTo)},
          el("td", {}, i === 0 ? [el("div", {class: "sharename"}, s.quotaShareName), el("div", {class: "strategy"}, s.strategy)] : ""),
          el("td", {}, c.capacityUnit),
          el("td", {class: "barcell"}, el("div", {class: "bar", style: {width: width + "%"}}, segs)),
          el("td", {class: "desc"}, describe(c, s.strategy)),
          el("td", {class: "num"}, c.owned), el("td", {class: "num"}, c.own), el("td", {class: "num"}, c.borrowed),
          el("td", {class: "num"}, c.lent), el("td", {class: "num"}, idle), el("td", {class: "num"}, reserved),
          el("td", {class: "num", "data-limit": c.limit}, c.limit < 0 ? "no limit" : c.limit)));
      });
    }
    frag.push(el("table", {class: "shares", "data-queue": q.jobQueue},
      el("thead", {}, el("tr", {}, ["share", "instance type", "capacity", "in words", "owns", "own in use", "borrowed", "lent", "idle", "reserved", "may use"]
        .map((h, i) => el("th", {class: i >= 4 ? "num" : null}, h)))),
      el("tbody", {}, rows)));
  }
  // Fair-share queues: the lending endpoint knows quota shares only; the
  // snapshot says how many identifiers run and what each holds.
  const quota = new Set((v.jobQueues || []).map(q => q.jobQueue));
  const others = (await queueNames()).filter(n => !quota.has(n));
  const snaps = await Promise.all(others.map(n => call("getjobqueuesnapshot", {jobQueue: n}).then(s => [n, s])));
  for (const [n, s] of snaps) {
    const fu = s && s.queueUtilization && s.queueUtilization.fairshareUtilization;
    if (!fu) continue;
    frag.push(el("h2", {}, "job queue " + n + " · fair share"));
    frag.push(el("div", {class: "envcap"}, (fu.activeShareCount || 0) + " share identifier(s) with running jobs. The next job is the head of the identifier that has used least (decayed, weighted); fair share preempts nothing."));
    const rows = (fu.topCapacityUtilization || []).map(u => el("tr", {class: "fair-row", "data-queue": n, "data-identifier": u.shareIdentifier},
      el("td", {class: "sharename"}, u.shareIdentifier),
      el("td", {}, (u.capacityUsage || []).map(c => c.quantity + " " + c.capacityUnit).join(", "))));
    frag.push(el("table", {class: "fair", "data-queue": n},
      el("thead", {}, el("tr", {}, el("th", {}, "share identifier"), el("th", {}, "in use"))),
      el("tbody", {}, rows)));
  }
  return frag;
}

// ---- Queue ----

async function viewQueue() {
  const names = await queueNames();
  const frag = [el("p", {class: "muted"}, "The RUNNABLE jobs in the order the scheduler considers them (the first 100 of each queue), and the job at the head of each quota share, each with the scheduler's reason for waiting.")];
  if (names.length === 0) frag.push(el("p", {class: "note"}, "No job queue yet."));
  const views = await Promise.all(names.map(n => get("/qshare/v1/queue?jobQueue=" + encodeURIComponent(n))));
  views.forEach(v => {
    frag.push(el("h2", {}, "job queue " + v.jobQueue));
    if (v.front.length === 0) {
      frag.push(el("p", {class: "muted", "data-empty-queue": v.jobQueue}, "No job waits."));
      return;
    }
    frag.push(el("h3", {}, "Front of the queue"));
    frag.push(el("table", {class: "front", "data-queue": v.jobQueue},
      el("thead", {}, el("tr", {}, el("th", {class: "num"}, "#"), el("th", {}, "job"), el("th", {}, "share"),
        el("th", {class: "num"}, "priority"), el("th", {}, "waiting"), el("th", {}, "why it waits"))),
      el("tbody", {}, v.front.map(j => el("tr", {"data-job-name": j.jobName, "data-position": j.position, "data-share": j.quotaShareName || ""},
        el("td", {class: "num"}, j.position), el("td", {}, jobLink(j.jobId, j.jobName)), el("td", {}, j.quotaShareName || j.shareIdentifier || ""),
        el("td", {class: "num"}, j.schedulingPriority), el("td", {}, ago(j.runnableSince)), el("td", {class: "reason"}, j.statusReason || "not yet considered"))))));
    if (v.quotaShares) {
      frag.push(el("h3", {}, "Front of each quota share"));
      frag.push(el("table", {class: "share-fronts", "data-queue": v.jobQueue},
        el("thead", {}, el("tr", {}, el("th", {}, "share"), el("th", {}, "head job"), el("th", {class: "num"}, "position in queue"),
          el("th", {class: "num"}, "priority"), el("th", {}, "why it waits"))),
        el("tbody", {}, v.shareFronts.map(f => el("tr", {"data-share": f.quotaShareName, "data-job-name": f.head.jobName},
          el("td", {class: "sharename"}, f.quotaShareName), el("td", {}, jobLink(f.head.jobId, f.head.jobName)),
          el("td", {class: "num"}, f.head.position || "beyond 100"), el("td", {class: "num"}, f.head.schedulingPriority),
          el("td", {class: "reason"}, f.head.statusReason || "not yet considered"))))));
    }
  });
  return frag;
}

// ---- Jobs ----

const JOB_ID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;
const STATUSES = ["SUBMITTED", "PENDING", "RUNNABLE", "SCHEDULED", "STARTING", "RUNNING", "SUCCEEDED", "FAILED"];
const jobFilter = {share: "", status: "", name: ""};

function jobFilters(shares) {
  const f = el("form", {class: "filters", id: "job-filters"});
  const share = el("select", {name: "share", id: "filter-share"}, el("option", {value: ""}, "every share"),
    shares.map(s => el("option", {value: s, selected: jobFilter.share === s ? "" : null}, s)));
  const status = el("select", {name: "status", id: "filter-status"}, el("option", {value: ""}, "every status"),
    STATUSES.map(s => el("option", {value: s, selected: jobFilter.status === s ? "" : null}, s)));
  const name = el("input", {name: "name", id: "filter-name", type: "search", placeholder: "part of a name", value: jobFilter.name});
  f.append(el("label", {}, "share", share), el("label", {}, "status", status), el("label", {}, "name", name));
  const apply = () => { generation++; jobFilter.share = share.value; jobFilter.status = status.value; jobFilter.name = name.value; refresh(); };
  share.addEventListener("change", apply);
  status.addEventListener("change", apply);
  name.addEventListener("input", apply);
  f.addEventListener("submit", e => { e.preventDefault(); apply(); });
  return f;
}

async function viewJobs() {
  const names = await queueNames();
  let jobs = [], more = false;
  for (const q of names) {
    const body = {jobQueue: q, maxResults: 100};
    if (jobFilter.status) body.jobStatus = jobFilter.status;
    else body.filters = [{name: "AFTER_CREATED_AT", values: ["0"]}];
    const r = await pages("listservicejobs", body, "jobSummaryList", 10);
    jobs = jobs.concat(r.items.map(j => Object.assign({queue: q}, j)));
    more = more || r.more;
  }
  const shares = [...new Set(jobs.map(j => j.quotaShareName || j.shareIdentifier).filter(Boolean))].sort();
  if (jobFilter.share && !shares.includes(jobFilter.share)) shares.push(jobFilter.share);
  const needle = jobFilter.name.toLowerCase();
  const shown = jobs.filter(j => (!jobFilter.share || (j.quotaShareName || j.shareIdentifier) === jobFilter.share) &&
    (!needle || j.jobName.toLowerCase().includes(needle)));
  shown.sort((a, b) => (b.createdAt || 0) - (a.createdAt || 0));
  return {
    keep: "job-filters", make: () => jobFilters(shares),
    body: [
      el("p", {class: "muted", id: "job-count"}, shown.length + " of " + jobs.length + " jobs" + (more ? " (only the newest 1,000 of a queue are read)" : "")),
      el("table", {class: "jobs"},
        el("thead", {}, el("tr", {}, ["job", "queue", "share", "status", "created", "started", "stopped", "status reason"].map(h => el("th", {}, h)))),
        el("tbody", {}, shown.map(j => el("tr", {"data-job-name": j.jobName, "data-status": j.status, "data-share": j.quotaShareName || ""},
          el("td", {}, jobLink(j.jobId, j.jobName)), el("td", {}, j.queue), el("td", {}, j.quotaShareName || j.shareIdentifier || ""),
          el("td", {}, statusBadge(j.status)), el("td", {}, fmtTime(j.createdAt)), el("td", {}, fmtTime(j.startedAt)),
          el("td", {}, fmtTime(j.stoppedAt)), el("td", {class: "reason"}, j.statusReason || "")))))],
  };
}

// ---- a job ----

async function viewJob(id) {
  const j = await call("describeservicejob", {jobId: id});
  let log;
  try {
    const r = await request("GET", "/qshare/v1/logs/" + encodeURIComponent(j.jobId));
    const text = await r.text();
    if (r.ok) {
      const lines = text.split("\n");
      if (lines[lines.length - 1] === "") lines.pop();
      log = {ok: true, text: lines.slice(-50).join("\n"), n: lines.length};
    } else {
      let m = text;
      try { m = JSON.parse(text).message; } catch (e) { /* text */ }
      log = {ok: false, text: m};
    }
  } catch (e) {
    log = {ok: false, text: String(e)};
  }
  const ps = j.preemptionSummary || {preemptedAttemptCount: 0, recentPreemptedAttempts: []};
  // A preemption's reason names the job it made room for by id: say who.
  const ids = [...new Set(ps.recentPreemptedAttempts.flatMap(a => (a.statusReason || "").match(JOB_ID) || []))].slice(0, 10);
  const who = {};
  await Promise.all(ids.map(async id => {
    try { who[id] = await call("describeservicejob", {jobId: id}); } catch (e) { /* gone: keep the id */ }
  }));
  const byWhom = a => ((a.statusReason || "").match(JOB_ID) || []).filter(id => who[id]).map(id =>
    el("div", {class: "by", "data-preempted-for": who[id].jobName}, "made room for ", jobLink(id, who[id].jobName),
      " (" + (who[id].quotaShareName || who[id].shareIdentifier || "no share") + ", priority " + who[id].schedulingPriority + ")"));
  // The latest attempt's training job: its FinalMetricDataList, as
  // DescribeTrainingJob gives it (the same values as qshare_training_metric).
  let metrics = null;
  const arn = j.latestAttempt && j.latestAttempt.serviceResourceId && j.latestAttempt.serviceResourceId.value;
  if (arn && (j.serviceRequestPayload || "").includes("MetricDefinitions")) {
    try {
      const tj = await sagemaker("DescribeTrainingJob", {TrainingJobName: arn.slice(arn.lastIndexOf("/") + 1)});
      metrics = {ok: true, name: tj.TrainingJobName, list: tj.FinalMetricDataList || []};
    } catch (e) {
      metrics = {ok: false, text: e.message};
    }
  }
  const attempts = j.attempts || [];
  // On a server with several executors (docs/executors.md) an attempt
  // that did not run on the default one names where it ran.
  const named = attempts.some(a => a.executor);
  const dur = (a) => a.startedAt ? Math.round(((a.stoppedAt || Date.now()) - a.startedAt) / 1000) + " s" : "";
  return [
    el("p", {}, el("a", {href: "#jobs"}, "← all jobs")),
    el("h2", {id: "job", "data-job-name": j.jobName, "data-status": j.status}, j.jobName, " ", statusBadge(j.status)),
    el("dl", {class: "kv"},
      [["job id", j.jobId], ["job queue", j.jobQueue], ["quota share", j.quotaShareName || j.shareIdentifier || ""],
        ["priority", j.schedulingPriority], ["status reason", j.statusReason || ""], ["created", fmtTime(j.createdAt)],
        ["started", fmtTime(j.startedAt)], ["stopped", fmtTime(j.stoppedAt)],
        ["capacity", (j.capacityUsage || []).map(c => c.quantity + " × " + c.capacityUnit).join(", ")],
        ["preempted", ps.preemptedAttemptCount + " time" + (ps.preemptedAttemptCount === 1 ? "" : "s")]]
        .map(([k, v]) => [el("dt", {}, k), el("dd", {"data-field": k}, v)])),
    el("h3", {}, "Preemptions"),
    ps.recentPreemptedAttempts.length === 0 ? el("p", {class: "muted"}, "Never preempted.") :
      el("div", {id: "preemptions"}, ps.recentPreemptedAttempts.map(a => el("div", {class: "preempt", "data-preemption": ""},
        el("div", {}, "attempt from " + fmtTime(a.startedAt) + " to " + fmtTime(a.stoppedAt)),
        el("div", {class: "reason"}, a.statusReason || "no reason recorded"), byWhom(a)))),
    el("h3", {}, "Attempts"),
    attempts.length === 0 ? el("p", {class: "muted"}, "No attempt yet.") :
      el("table", {class: "attempts"},
        el("thead", {}, el("tr", {}, ["#", "started", "stopped", "ran", "how it ended"].concat(named ? ["executor"] : []).map(h => el("th", {}, h)))),
        el("tbody", {}, attempts.map((a, i) => el("tr", {"data-attempt": i + 1},
          el("td", {class: "num"}, i + 1), el("td", {}, fmtTime(a.startedAt)), el("td", {}, a.stoppedAt ? fmtTime(a.stoppedAt) : "running"),
          el("td", {class: "num"}, dur(a)), el("td", {class: "reason"}, a.statusReason || (a.stoppedAt ? "" : "running")),
          named ? el("td", {"data-field": "executor"}, a.executor || "default") : [])))),
    ...(metrics === null ? [] : [el("h3", {}, "Final metrics" + (metrics.ok ? " of " + metrics.name : "")),
      !metrics.ok ? el("p", {class: "muted", id: "metrics"}, metrics.text) :
      metrics.list.length === 0 ? el("p", {class: "muted", id: "metrics"}, "None yet: no line of the latest attempt's log matches the payload's MetricDefinitions.") :
        el("table", {class: "metrics", id: "metrics"},
          el("thead", {}, el("tr", {}, ["metric", "value", "at"].map(h => el("th", {}, h)))),
          el("tbody", {}, metrics.list.map(m => el("tr", {"data-metric": m.MetricName},
            el("td", {}, m.MetricName), el("td", {class: "num", "data-field": "value"}, m.Value), el("td", {}, fmtTime(m.Timestamp * 1000))))))]),
    el("h3", {}, "Log" + (log.ok ? " (last " + Math.min(50, log.n) + " of " + log.n + " lines of the latest attempt)" : "")),
    log.ok ? el("pre", {class: "log", id: "log"}, log.text || "(empty)") : el("p", {class: "muted", id: "log"}, log.text),
  ];
}

// ---- Events ----

// named replaces each job id in text with the job's name, where known.
function named(text, names) {
  return (text || "").replace(JOB_ID, id => names[id] || id);
}

const LANES = {start: 0, preempt: 1, finish: 2, fail: 2};

async function viewEvents() {
  const v = await get("/qshare/v1/events");
  if (!v.enabled) {
    return [el("p", {class: "note", id: "events-off"},
      "This server keeps no event log it can read, so there is no timeline. Start it with --events FILE (qshare serve --events events.jsonl) to see the starts, preemptions and finishes of the last hour here.")];
  }
  const now = Date.now() / 1000, from = now - 3600;
  const evs = v.events;
  const names = {};
  for (const e of evs) {
    if (e.jobName) names[e.job] = e.jobName;
    if (e.forName) names[e.for] = e.forName;
  }
  const count = k => evs.filter(e => e.event === k).length;
  const ticks = evs.map(e => el("div", {class: "tick " + e.event, title: e.event + " " + (e.jobName || e.job),
    style: {left: Math.max(0, Math.min(99.6, 100 * (e.t - from) / 3600)).toFixed(2) + "%", top: (4 + 14 * (LANES[e.event] || 0)) + "px"}}));
  const newest = evs.slice(-300).reverse();
  const what = e => {
    const reason = named(e.reason, names);
    if (e.event === "preempt") return "preempted" + (e.for ? " for " + (e.forName || e.for) : "") + (reason ? ": " + reason : "");
    return reason;
  };
  return [
    el("p", {class: "muted"}, "The last hour of the event log: " + count("start") + " starts, " + count("preempt") + " preemptions, " +
      count("finish") + " finishes, " + count("fail") + " failures" + (v.truncated ? " (only the newest 5,000 events)" : "") + "."),
    el("div", {class: "lanes"},
      el("div", {class: "lane-names"}, el("div", {}, "starts"), el("div", {}, "preemptions"), el("div", {}, "finishes, failures")),
      el("div", {class: "timeline", id: "timeline"}, ticks)),
    el("div", {class: "muted axis"}, el("span", {}, fmtTime(from * 1000) + " (an hour ago)"), el("span", {}, "30 min ago"), el("span", {}, "now")),
    el("table", {class: "events"},
      el("thead", {}, el("tr", {}, ["time", "event", "job", "share", "capacity", "details"].map(h => el("th", {}, h)))),
      el("tbody", {}, newest.map(e => el("tr", {"data-event": e.event, "data-job": e.job, "data-job-name": e.jobName || "", "data-share": e.share},
        el("td", {}, fmtTime(e.t * 1000)), el("td", {class: "ev-" + e.event}, e.event), el("td", {}, jobLink(e.job, e.jobName || e.job)),
        el("td", {}, e.share), el("td", {class: "nowrap"}, e.instances ? e.instances + " × " + e.instance_type : ""), el("td", {class: "reason"}, what(e)))))),
  ];
}

// ---- routing and refresh ----

function route() {
  const h = decodeURIComponent(location.hash.replace(/^#/, ""));
  if (h.startsWith("job/")) return {view: "job", arg: h.slice(4)};
  if (["shares", "queue", "jobs", "events"].includes(h)) return {view: h};
  return {view: "shares"};
}

async function refresh() {
  clearTimeout(timer);
  const gen = generation;
  const r = route();
  document.querySelectorAll("nav a").forEach(a => a.classList.toggle("active", a.dataset.view === (r.view === "job" ? "jobs" : r.view)));
  const t0 = performance.now();
  try {
    const out = await ({shares: viewShares, queue: viewQueue, jobs: viewJobs, job: () => viewJob(r.arg), events: viewEvents})[r.view]();
    if (gen !== generation) return;
    if (out && out.keep) {
      // Keep the filter form (and its focus) across refreshes.
      let keep = document.getElementById(out.keep);
      if (!keep || main.dataset.view !== r.view) {
        main.replaceChildren(out.make(), el("div", {id: "view-body"}));
      }
      document.getElementById("view-body").replaceChildren(...out.body);
    } else {
      main.replaceChildren(...out);
    }
    main.dataset.view = r.view;
    renders++;
    document.body.dataset.renders = renders;
    document.body.dataset.renderMs = Math.round(performance.now() - t0);
    // And once the browser has laid the page out and painted it.
    const n = renders;
    requestAnimationFrame(() => setTimeout(() => {
      document.body.dataset.paintMs = Math.round(performance.now() - t0);
      document.body.dataset.painted = n;
    }, 0));
    statusEl.className = "";
    statusEl.textContent = "updated " + new Date().toLocaleTimeString([], {hour12: false}) + " · refreshes every " + POLL_MS / 1000 + " s";
  } catch (e) {
    if (gen !== generation) return;
    if (config.auth && e instanceof APIError && SIGN_IN_ERRORS.includes(e.type)) {
      signIn(e.type === "SignInRequired" ? "" : e.message);
      return;
    }
    statusEl.className = "error";
    statusEl.textContent = e instanceof APIError ? e.message : "cannot reach the server: " + e.message;
    if (!main.dataset.view) main.replaceChildren(el("p", {class: "note", id: "view-error"}, statusEl.textContent));
  }
  if (gen === generation) timer = setTimeout(refresh, POLL_MS);
}

// ---- signing in ----

const whoEl = document.getElementById("who");

// signIn shows the form that asks for an access key, with why (a refusal
// of the key before, or nothing).
function signIn(why) {
  clearTimeout(timer);
  generation++;
  sessionStorage.removeItem(KEY_ITEM);
  signingKeys.clear();
  whoEl.replaceChildren();
  delete main.dataset.view;
  statusEl.className = "";
  statusEl.textContent = "";
  if (!window.crypto || !crypto.subtle) {
    main.replaceChildren(el("p", {class: "note", id: "view-error"}, "This server requires signed requests, and this browser signs only on a page opened over HTTPS or from localhost: open the dashboard that way."));
    return;
  }
  const id = el("input", {id: "access-key-id", name: "accessKeyId", autocomplete: "username", required: "", spellcheck: "false", size: 28});
  const secret = el("input", {id: "secret-access-key", name: "secretAccessKey", type: "password", autocomplete: "current-password", required: "", size: 44});
  const form = el("form", {class: "signin", id: "signin"},
    el("h2", {}, "Sign in"),
    el("p", {class: "muted"}, "This server requires signed requests (qshare serve --auth). Give an access key of its auth file: the page signs each request with it, as the AWS SDKs do, and shows what its principal may read. The key stays in this tab, and is forgotten when you sign out or close the tab."),
    why ? el("p", {class: "note error", id: "signin-error"}, why) : null,
    el("label", {}, "access key id", id),
    el("label", {}, "secret access key", secret),
    el("button", {type: "submit", id: "signin-button"}, "Sign in"));
  form.addEventListener("submit", async e => {
    e.preventDefault();
    sessionStorage.setItem(KEY_ITEM, JSON.stringify({id: id.value.trim(), secret: secret.value.trim()}));
    start();
  });
  main.replaceChildren(form);
  id.focus();
}

// start learns who the key in this tab belongs to, says so, and shows the
// view.
async function start() {
  if (config.auth) {
    if (!storedKey()) { signIn(""); return; }
    try {
      const me = await get("/qshare/v1/whoami");
      const out = el("button", {type: "button", id: "signout"}, "sign out");
      out.addEventListener("click", () => signIn(""));
      whoEl.replaceChildren(el("span", {id: "principal", "data-principal": me.principal}, me.principal.replace(/^.*:user\//, "")), " ", out);
    } catch (e) {
      if (e instanceof APIError && SIGN_IN_ERRORS.includes(e.type)) { signIn(e.message); return; }
      statusEl.className = "error";
      statusEl.textContent = e instanceof APIError ? e.message : "cannot reach the server: " + e.message;
      return;
    }
  }
  generation++;
  main.replaceChildren(el("p", {}, "Loading…"));
  refresh();
}

window.addEventListener("hashchange", () => {
  if (config.auth && !storedKey()) return; // the sign-in form stays
  generation++; delete main.dataset.view; main.replaceChildren(el("p", {}, "Loading…")); refresh();
});

fetch("config.json", {cache: "no-store"}).then(r => r.json()).then(c => { config = c; start(); },
  e => { statusEl.className = "error"; statusEl.textContent = "cannot reach the server: " + e.message; });
