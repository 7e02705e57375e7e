// memvault console: a framework-free page over the public /v1 API.
//
// Every stored field (content, keys, tags, refs, messages, run state) is hostile input:
// it reaches the page only as text nodes (el() below, textContent), never as markup.
// The bearer token lives in this tab's sessionStorage only (never a persistent store or a
// cookie), so it is gone when the tab closes.

const TOKEN_KEY = "memvault.token";
const ENDPOINT_KEY = "memvault.endpoint";
const SIGN_IN_KEY = "memvault.signInKey";
const POLL_MS = 400;
const POLL_LIMIT = 300;
const HISTORY_PAGE = 25;
const EVENTS_PAGE = 25;

const state = {
  token: null,
  endpoint: "",
  claims: {},
  subject: "",
  nextToken: null,
  memories: [],
  selected: null,
  polling: 0,
};

// ---------------------------------------------------------------- building blocks

function $(id) {
  return document.getElementById(id);
}

// An element whose children are elements or strings; a string is always a text node.
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function badge(value) {
  const text = value === null || value === undefined ? "—" : String(value);
  return el("span", { class: `badge ${text.replace(/[^A-Za-z_]/g, "")}` }, text);
}

function when(iso) {
  if (!iso) return "—";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return String(iso);
  return date.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

// A table: columns are [label, (row) => cell content]; narrow screens show cards.
function table(columns, rows, rowAttrs = () => ({})) {
  const head = el("thead", {}, el("tr", {}, columns.map(([label]) => el("th", { scope: "col" }, label))));
  const body = el(
    "tbody",
    {},
    rows.map((row) =>
      el(
        "tr",
        rowAttrs(row),
        columns.map(([label, cell, cls]) => el("td", { "data-label": label, class: cls }, cell(row))),
      ),
    ),
  );
  return el("table", { class: "cards" }, head, body);
}

function fields(pairs) {
  return pairs.flatMap(([label, value]) => [el("dt", {}, label), el("dd", {}, value)]);
}

function json(value) {
  return el("pre", { class: "json" }, JSON.stringify(value, null, 2));
}

// ---------------------------------------------------------------- messages

function showError(error) {
  const box = $("alert");
  box.className = "alert";
  const parts = [el("code", {}, error.code), ": ", error.message];
  if (error.status) parts.push(el("span", { class: "muted" }, ` (HTTP ${error.status})`));
  const details = error.details && Object.keys(error.details).length ? json(error.details) : null;
  box.replaceChildren(el("div", { class: "error-line" }, parts), details);
  box.hidden = false;
  box.dataset.code = error.code;
}

function showInfo(text) {
  const box = $("alert");
  box.className = "alert info";
  box.setAttribute("role", "status");
  box.replaceChildren(text);
  box.hidden = false;
  box.dataset.code = "";
}

function clearMessage() {
  $("alert").hidden = true;
  $("alert").replaceChildren();
}

class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details || {};
  }
}

// Any failure the page did not foresee: one line, never a stack trace.
function report(error) {
  if (error instanceof ApiError) showError(error);
  else showError({ code: "console_error", message: "the console hit an unexpected problem; try again" });
}

window.addEventListener("error", (event) => {
  event.preventDefault();
  report(null);
});
window.addEventListener("unhandledrejection", (event) => {
  event.preventDefault();
  report(event.reason);
});

// ---------------------------------------------------------------- the API

async function api(method, path, { body, query } = {}) {
  let url = `${state.endpoint}${path}`;
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query || {})) {
    if (value !== "" && value !== null && value !== undefined) params.set(name, value);
  }
  if ([...params].length) url += `?${params}`;
  const headers = { Accept: "application/json" };
  if (state.token) headers.Authorization = `Bearer ${state.token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "omit",
      cache: "no-store",
      referrerPolicy: "no-referrer",
    });
  } catch {
    throw new ApiError(0, "network_error", `the API at ${state.endpoint || "this origin"} could not be reached`);
  }
  let payload = null;
  const text = await response.text();
  if (text) {
    try {
      payload = JSON.parse(text);
    } catch {
      throw new ApiError(response.status, "bad_response", "the API answered something that is not JSON");
    }
  }
  if (!response.ok) {
    const error = payload && payload.error;
    if (error && typeof error.code === "string") {
      throw new ApiError(response.status, error.code, String(error.message || ""), error.details);
    }
    throw new ApiError(response.status, "http_error", `the API answered HTTP ${response.status}`);
  }
  return payload;
}

const enc = encodeURIComponent;
const subjectPath = () => `/v1/subjects/${enc(state.subject)}`;

// ---------------------------------------------------------------- signing in

function decodeClaims(token) {
  // For display only: the API verifies the token, the page never trusts these.
  try {
    const part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    const claims = JSON.parse(atob(part.padEnd(part.length + ((4 - (part.length % 4)) % 4), "=")));
    return claims && typeof claims === "object" ? claims : {};
  } catch {
    return {};
  }
}

function signIn(token, endpoint) {
  state.token = token;
  state.endpoint = endpoint.replace(/\/+$/, "");
  state.claims = decodeClaims(token);
  sessionStorage.setItem(TOKEN_KEY, token);
  sessionStorage.setItem(ENDPOINT_KEY, state.endpoint);
  const claims = state.claims;
  const expires = claims.exp ? when(new Date(claims.exp * 1000).toISOString()) : "?";
  $("who-text").replaceChildren(
    `tenant ${claims.tenant_id || "?"} · ${claims.sub || "?"} · scopes ${claims.scope || "—"} · until ${expires}`,
  );
  $("who").hidden = false;
  $("sign-in").hidden = true;
  $("app").hidden = false;
  const subject = claims.subject_id || $("subject").value || "";
  $("subject").value = subject;
  if (subject) openSubject(subject);
  else $("subject").focus();
}

function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  state.token = null;
  state.polling += 1;
  $("who").hidden = true;
  $("app").hidden = true;
  $("sign-in").hidden = false;
  $("memories").replaceChildren();
  $("detail").hidden = true;
  $("deletion").hidden = true;
  showInfo("Signed out; the token is gone from this tab.");
}

async function devSignIn(event) {
  event.preventDefault();
  clearMessage();
  const form = event.target;
  const data = new FormData(form);
  const answer = await fetch("dev-token", {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    credentials: "omit",
    body: JSON.stringify({
      key: sessionStorage.getItem(SIGN_IN_KEY) || "",
      tenant: data.get("tenant"),
      subject: data.get("subject"),
      max_sensitivity: data.get("max_sensitivity"),
      scopes: data.getAll("scopes"),
    }),
  }).catch(() => null);
  if (!answer) throw new ApiError(0, "network_error", "the local stack could not be reached");
  const payload = await answer.json().catch(() => null);
  if (!answer.ok || !payload || typeof payload.token !== "string") {
    const error = (payload && payload.error) || {};
    throw new ApiError(answer.status, error.code || "http_error", error.message || `HTTP ${answer.status}`, error.details);
  }
  signIn(payload.token, $("endpoint").value || window.location.origin);
}

function tokenSignIn(event) {
  event.preventDefault();
  clearMessage();
  const token = $("token").value.trim();
  $("token").value = "";
  signIn(token, $("endpoint").value.trim() || window.location.origin);
}

// ---------------------------------------------------------------- memories

function openSubject(subject) {
  state.subject = subject;
  state.selected = null;
  $("detail").hidden = true;
  listMemories().catch(report);
}

function filters() {
  const data = new FormData($("filter-form"));
  return Object.fromEntries([...data].filter(([, v]) => v !== ""));
}

async function listMemories(more = false) {
  if (!more) {
    state.memories = [];
    state.nextToken = null;
  }
  const page = await api("GET", `${subjectPath()}/memories`, {
    query: { ...filters(), limit: 50, next_token: more ? state.nextToken : null },
  });
  state.memories = state.memories.concat(page.items);
  state.nextToken = page.next_token;
  $("more").hidden = !state.nextToken;
  renderMemories(state.memories, null);
  const count = state.memories.length;
  $("list-note").replaceChildren(
    count ? `${count} current ${count === 1 ? "memory" : "memories"} of ${state.subject}` : `${state.subject} has no current memories.`,
  );
}

async function recall(event) {
  event.preventDefault();
  clearMessage();
  const query = $("query").value.trim();
  if (!query) return listMemories();
  const data = filters();
  const body = { query, limit: 20 };
  if (data.kind) body.kinds = [data.kind];
  if (data.tag) body.tags = [data.tag];
  const found = await api("POST", `${subjectPath()}/recall`, { body });
  state.nextToken = null;
  $("more").hidden = true;
  renderMemories(
    found.items.map((item) => item.memory),
    new Map(found.items.map((item) => [item.memory.memory_id, item])),
  );
  const notes = [`${found.items.length} recalled for “${query}”. ${found.notice}`];
  if (found.conflicts && found.conflicts.length) notes.push(` ${found.conflicts.length} conflict(s) for one canonical key.`);
  $("list-note").replaceChildren(notes.join(""));
}

function why(item) {
  const why = item.why;
  const parts = [`matched by ${why.matched_by.join(" + ") || "—"}`];
  if (why.keyword_rank) parts.push(`keyword rank ${why.keyword_rank}`);
  if (why.vector_rank) parts.push(`vector rank ${why.vector_rank}`);
  if (why.similarity !== null && why.similarity !== undefined) parts.push(`similarity ${why.similarity.toFixed(2)}`);
  parts.push(`relevance ${why.relevance.toFixed(3)}`);
  return parts.join(" · ");
}

function source(memory) {
  return memory.source.ref ? `${memory.source.type} · ${memory.source.ref}` : memory.source.type;
}

function renderMemories(memories, recalled) {
  const columns = [
    ["Content", (m) => m.content, "content"],
    ["Kind", (m) => m.kind],
    ["Canonical key", (m) => m.canonical_key || "—"],
    ["Source", source],
    ["Consent", (m) => (m.consent ? "yes" : "no")],
    ["Sensitivity", (m) => badge(m.sensitivity)],
    ["Version", (m) => String(m.version)],
    ["Status", (m) => badge(m.status)],
    ["Index", (m) => badge(m.index_status)],
    ["Expires", (m) => when(m.expires_at)],
  ];
  if (recalled) columns.push(["Why it matched", (m) => why(recalled.get(m.memory_id))]);
  columns.push([
    "Actions",
    (m) =>
      el(
        "div",
        { class: "actions" },
        el("button", { type: "button", class: "open", onclick: () => selectMemory(m.memory_id).catch(report) }, "Details"),
        el("button", { type: "button", class: "delete danger", onclick: () => askDelete(m) }, "Delete…"),
      ),
  ]);
  $("memories").replaceChildren(
    memories.length
      ? table(columns, memories, (m) => ({
          "data-memory-id": m.memory_id,
          class: state.selected && state.selected.memory_id === m.memory_id ? "selected" : null,
        }))
      : el("p", { class: "empty" }, recalled ? "Nothing recalled." : "No memories."),
  );
}

function askDelete(memory) {
  const row = document.querySelector(`tr[data-memory-id="${CSS.escape(memory.memory_id)}"] .actions`);
  if (!row || row.querySelector(".confirm-delete")) return;
  const yes = el(
    "button",
    { type: "button", class: "confirm-delete danger", onclick: () => deleteMemory(memory).catch(report) },
    "Yes, delete",
  );
  const no = el("button", { type: "button", class: "cancel-delete", onclick: () => renderMemories(state.memories, null) }, "Cancel");
  row.append(yes, no);
  yes.focus();
}

async function selectMemory(memoryId) {
  clearMessage();
  const memory = await api("GET", `${subjectPath()}/memories/${enc(memoryId)}`);
  state.selected = memory;
  renderDetail(memory);
  const history = await api("GET", `${subjectPath()}/memories/${enc(memoryId)}/history`);
  renderHistory(history.versions);
}

function renderDetail(memory) {
  $("detail-title").replaceChildren(`Memory ${memory.memory_id}`);
  $("detail-fields").replaceChildren(
    ...fields([
      ["Content", memory.content],
      ["Kind", memory.kind],
      ["Canonical key", memory.canonical_key || "—"],
      ["Scope", Object.entries(memory.scope || {}).map(([k, v]) => `${k}=${v}`).join(", ") || "—"],
      ["Tags", memory.tags.join(", ") || "—"],
      ["Source", source(memory)],
      ["Consent", memory.consent ? "yes" : "no"],
      ["Sensitivity", badge(memory.sensitivity)],
      ["Visibility", memory.visibility.join(", ") || "every reader the token's ceiling admits"],
      ["Status", badge(memory.status)],
      ["Version", String(memory.version)],
      ["Supersedes", memory.supersedes_id || "—"],
      ["Index", el("span", {}, badge(memory.index_status), memory.embedding_model ? ` ${memory.embedding_model}` : "")],
      ["Valid from", when(memory.valid_from)],
      ["Written", when(memory.created_at)],
      ["Expires", when(memory.expires_at)],
    ]),
  );
  $("correct-content").value = memory.content;
  $("expected-version").value = String(memory.version);
  $("detail").hidden = false;
  renderMemories(state.memories, null);
}

function renderHistory(versions) {
  $("history").replaceChildren(
    table(
      [
        ["Version", (v) => String(v.version)],
        ["Status", (v) => badge(v.status)],
        ["Content", (v) => v.content, "content"],
        ["Source", source],
        ["Written", (v) => when(v.created_at)],
        ["Memory id", (v) => v.memory_id],
      ],
      versions,
    ),
  );
}

async function correct(event) {
  event.preventDefault();
  clearMessage();
  const memory = state.selected;
  if (!memory) return;
  const body = {
    expected_version: Number($("expected-version").value),
    content: $("correct-content").value,
  };
  const updated = await api("PATCH", `${subjectPath()}/memories/${enc(memory.memory_id)}`, { body });
  showInfo(`Corrected: version ${updated.version} of ${updated.memory_id}.`);
  await listMemories();
  await selectMemory(updated.memory_id);
  showInfo(`Corrected: version ${updated.version} of ${updated.memory_id}.`);
}

// The deletion panel follows one job at a time: the one just asked for.
function startDeletion(job) {
  followDeletion(job, $("deletion-summary"), $("deletion-copies"));
  $("deletion").hidden = false;
}

function resetDeletion() {
  state.polling += 1;
  $("deletion").hidden = true;
  delete $("deletion-summary").dataset.status;
  delete $("deletion-summary").dataset.deletionId;
}

async function deleteMemory(memory) {
  clearMessage();
  resetDeletion();
  const job = await api("DELETE", `${subjectPath()}/memories/${enc(memory.memory_id)}`);
  if (state.selected && state.selected.memory_id === memory.memory_id) $("detail").hidden = true;
  startDeletion(job);
  await listMemories();
}

async function forget() {
  clearMessage();
  resetDeletion();
  $("forget-confirm").hidden = true;
  $("forget").hidden = false;
  const job = await api("DELETE", `${subjectPath()}/memories`);
  $("detail").hidden = true;
  state.selected = null;
  startDeletion(job);
  await listMemories();
}

async function exportSubject() {
  clearMessage();
  const exported = await api("GET", `${subjectPath()}/export`);
  const blob = new Blob([JSON.stringify(exported, null, 2)], { type: "application/json" });
  const url = URL.createObjectURL(blob);
  const stamp = String(exported.exported_at).replace(/[^0-9A-Za-z]/g, "");
  const link = el("a", { href: url, download: `memvault-export-${state.subject}-${stamp}.json` });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
  showInfo(`Exported ${exported.memories.length} memories of ${exported.subject_id}.`);
}

// ---------------------------------------------------------------- deletions

function renderDeletion(job, summary, copies) {
  summary.replaceChildren(
    el("span", {}, `${job.scope === "subject" ? "Forget" : "Delete"} ${job.deletion_id}: `),
    badge(job.status),
    el("span", { class: "muted" }, ` requested ${when(job.requested_at)}${job.completed_at ? `, completed ${when(job.completed_at)}` : ""}`),
  );
  summary.dataset.status = job.status;
  summary.dataset.deletionId = job.deletion_id;
  copies.replaceChildren(
    table(
      [
        ["Copy", (c) => c.copy],
        ["Status", (c) => badge(c.status)],
        ["Attempts", (c) => String(c.attempts)],
        ["Updated", (c) => when(c.updated_at)],
        ["Reason", (c) => c.reason || "—"],
      ],
      job.copies,
      (c) => ({ "data-copy": c.copy, "data-status": c.status }),
    ),
  );
}

// Poll the job until it is COMPLETED or FAILED, showing each copy's status as it moves.
function followDeletion(job, summary, copies) {
  const ticket = ++state.polling;
  renderDeletion(job, summary, copies);
  let rounds = 0;
  const tick = async () => {
    if (ticket !== state.polling) return;
    try {
      const current = await api("GET", `/v1/deletions/${enc(job.deletion_id)}`);
      if (ticket !== state.polling) return;
      renderDeletion(current, summary, copies);
      if (current.status === "COMPLETED" || current.status === "FAILED") return;
    } catch (error) {
      report(error);
      return;
    }
    if (++rounds < POLL_LIMIT) setTimeout(tick, POLL_MS);
  };
  setTimeout(tick, POLL_MS);
}

async function lookUpDeletion(event) {
  event.preventDefault();
  clearMessage();
  const id = $("deletion-id").value.trim();
  const job = await api("GET", `/v1/deletions/${enc(id)}`);
  const summary = el("p", { id: "lookup-summary", "aria-live": "polite" });
  const copies = el("div", { class: "table-wrap" });
  $("deletion-lookup").replaceChildren(summary, copies);
  followDeletion(job, summary, copies);
}

// ---------------------------------------------------------------- sessions and runs

async function readSession(event) {
  event.preventDefault();
  clearMessage();
  const id = $("session-id").value.trim();
  const session = await api("GET", `${subjectPath()}/sessions/${enc(id)}`);
  const parts = [
    el(
      "dl",
      { class: "fields card", id: "session-clocks" },
      ...fields([
        ["Session", session.session_id],
        ["Created", when(session.created_at)],
        ["Last activity", when(session.last_activity_at)],
        ["Idle expiry", when(session.idle_expires_at)],
        ["Absolute expiry", when(session.expires_at)],
        ["Messages", String(session.message_count)],
        ["Withheld (above your ceiling)", String(session.withheld_messages || 0)],
      ]),
    ),
    el("h3", {}, "Recent messages"),
    session.messages.length
      ? table(
          [
            ["#", (m) => String(m.seq)],
            ["Role", (m) => m.role],
            ["Content", (m) => m.content, "content"],
            ["Sensitivity", (m) => badge(m.sensitivity)],
            ["At", (m) => when(m.created_at)],
          ],
          session.messages,
        )
      : el("p", {}, "No messages you may read."),
  ];
  if (session.summary) parts.push(el("h3", {}, "Summary"), json(session.summary));
  else if (session.summary_withheld) parts.push(el("p", { class: "muted" }, "A summary exists above your sensitivity ceiling."));
  $("session").replaceChildren(...parts);
}

// The run's event receipts (what arrived, when, and what it did), a page at a time: "More
// events" asks for the next page and adds it. A payload is never stored, so never shown.
function runEvents(id, query, first) {
  const shown = [];
  const note = el("p", { class: "muted", id: "run-events-note", "aria-live": "polite" });
  const wrap = el("div", { class: "table-wrap", id: "run-events" });
  const more = el("button", { type: "button", id: "run-events-more" }, "More events");
  let nextToken = null;
  const render = (page) => {
    shown.push(...page.items);
    nextToken = page.next_token;
    more.hidden = !nextToken;
    wrap.replaceChildren(
      shown.length
        ? table(
            [
              ["Event", (e) => e.event_id, "content"],
              ["Type", (e) => e.type],
              ["Received", (e) => when(e.received_at)],
              ["Effect", (e) => (e.applied ? `applied: wrote version ${e.version}` : `recorded, changed nothing (at version ${e.version})`)],
            ],
            shown,
            (e) => ({ "data-event-id": e.event_id, "data-applied": String(e.applied) }),
          )
        : el("p", {}, "No events delivered."),
    );
    note.replaceChildren(
      `${shown.length} event(s)${nextToken ? " so far" : ""}, by event id. Payloads are never stored (only their hash, for idempotency), so none is shown.`,
    );
  };
  more.addEventListener(
    "click",
    guarded(async () => {
      clearMessage();
      more.disabled = true;
      try {
        render(await api("GET", `/v1/runs/${enc(id)}/events`, { query: { ...query, limit: EVENTS_PAGE, next_token: nextToken } }));
      } finally {
        more.disabled = false;
      }
    }),
  );
  render(first);
  return [el("h3", {}, "Events"), note, wrap, more];
}

async function readRun(event) {
  event.preventDefault();
  clearMessage();
  const id = $("run-id").value.trim();
  const query = state.claims.subject_id ? {} : { subject_id: state.subject };
  const run = await api("GET", `/v1/runs/${enc(id)}`, { query });
  const first = Math.max(1, run.version - HISTORY_PAGE + 1);
  const versions = [];
  for (let v = run.version; v >= first; v -= 1) {
    versions.push(v === run.version ? run : await api("GET", `/v1/runs/${enc(id)}/versions/${v}`, { query }));
  }
  const events = await api("GET", `/v1/runs/${enc(id)}/events`, { query: { ...query, limit: EVENTS_PAGE } });
  const historyNote =
    first > 1 ? `the ${HISTORY_PAGE} latest of ${run.version} checkpoints` : `${run.version} checkpoint(s)`;
  $("run").replaceChildren(
    el(
      "dl",
      { class: "fields card", id: "run-head" },
      ...fields([
        ["Run", run.run_id],
        ["Subject", run.subject_id],
        ["Status", badge(run.status)],
        ["Step", run.step],
        ["Version", String(run.version)],
        ["Plan", run.plan_version],
        ["Pending approvals", run.pending_approvals.join(", ") || "—"],
        ["Created", when(run.created_at)],
        ["Updated", when(run.updated_at)],
      ]),
    ),
    el("h3", {}, "State"),
    json(run.state),
    el("h3", {}, "Operations"),
    run.operations.length
      ? table(
          [
            ["Operation", (o) => o.operation_id],
            ["Status", (o) => badge(o.status)],
            ["Result", (o) => o.result_ref || "—"],
            ["Updated", (o) => when(o.updated_at)],
          ],
          run.operations,
        )
      : el("p", {}, "No operations recorded."),
    ...runEvents(id, query, events),
    el("h3", {}, `Checkpoint history (${historyNote}, newest first)`),
    el(
      "div",
      { class: "table-wrap", id: "run-history" },
      table(
        [
          ["Version", (c) => String(c.version)],
          ["Status", (c) => badge(c.status)],
          ["Step", (c) => c.step],
          ["Pending approvals", (c) => c.pending_approvals.join(", ") || "—"],
          ["Written", (c) => when(c.updated_at)],
          ["State", (c) => JSON.stringify(c.state), "content"],
        ],
        versions,
        (c) => ({ "data-version": c.version }),
      ),
    ),
  );
}

// ---------------------------------------------------------------- wiring

function showView(name) {
  for (const tab of document.querySelectorAll(".tab")) tab.setAttribute("aria-pressed", String(tab.dataset.view === name));
  for (const view of document.querySelectorAll(".view")) view.hidden = view.id !== `view-${name}`;
}

function guarded(handler) {
  return (event) => {
    Promise.resolve()
      .then(() => handler(event))
      .catch(report);
  };
}

async function start() {
  // A sign-in key arrives in the URL fragment (never sent to a server); keep it in the tab.
  const fragment = new URLSearchParams(window.location.hash.slice(1));
  if (fragment.get("key")) {
    sessionStorage.setItem(SIGN_IN_KEY, fragment.get("key"));
    history.replaceState(null, "", window.location.pathname + window.location.search);
  }
  $("dev-form").addEventListener("submit", guarded(devSignIn));
  $("token-form").addEventListener("submit", guarded(tokenSignIn));
  $("sign-out").addEventListener("click", signOut);
  $("subject-form").addEventListener("submit", (event) => {
    event.preventDefault();
    clearMessage();
    openSubject($("subject").value.trim());
  });
  $("filter-form").addEventListener("submit", guarded((event) => {
    event.preventDefault();
    clearMessage();
    $("query").value = "";
    return listMemories();
  }));
  $("recall-form").addEventListener("submit", guarded(recall));
  $("more").addEventListener("click", guarded(() => listMemories(true)));
  $("correct-form").addEventListener("submit", guarded(correct));
  $("export").addEventListener("click", guarded(exportSubject));
  $("forget").addEventListener("click", () => {
    $("forget").hidden = true;
    $("forget-confirm").hidden = false;
    $("forget-no").focus();
  });
  $("forget-no").addEventListener("click", () => {
    $("forget-confirm").hidden = true;
    $("forget").hidden = false;
    $("forget").focus();
  });
  $("forget-yes").addEventListener("click", guarded(forget));
  $("session-form").addEventListener("submit", guarded(readSession));
  $("run-form").addEventListener("submit", guarded(readRun));
  $("deletion-form").addEventListener("submit", guarded(lookUpDeletion));
  for (const tab of document.querySelectorAll(".tab")) tab.addEventListener("click", () => showView(tab.dataset.view));

  let config = {};
  try {
    const answer = await fetch("config.json", { cache: "no-store", credentials: "omit" });
    if (answer.ok) config = await answer.json();
  } catch {
    config = {};
  }
  $("endpoint").value = sessionStorage.getItem(ENDPOINT_KEY) || config.api || window.location.origin;
  if (config.dev_sign_in) {
    $("dev-form").hidden = false;
    if (!sessionStorage.getItem(SIGN_IN_KEY)) {
      $("dev-note").replaceChildren(
        "Open the console link that `memvault run` printed (it carries a sign-in key) to mint a dev token here.",
      );
    }
  }
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) signIn(token, $("endpoint").value);
  document.body.dataset.ready = "true";
}

start().catch(report);
