extension AdminPage {
    /// `GET /admin/app.js`: the page's behaviour, plain JavaScript over `/v1/admin`.
    ///
    /// Everything the API answers goes on the page as text (`textContent`, Text nodes,
    /// attribute values); nothing is parsed as HTML, and the policy's Trusted Types rule
    /// would make any attempt throw.
    static let script = #"""
        "use strict";
        (function () {
          const KEY_ITEM = "tether.adminKey";
          const READ_ONLY_ITEM = "tether.adminKeyReadOnly";
          const KEY_SHAPE = /^tadm_[A-Za-z0-9_-]{43}$/;
          const PROVIDERS = ["apple", "facebook", "google", "password"];
          const RESULTS_PAGE = 25;
          const HISTORY_PAGE = 200;
          const REASON_LIMIT = 500;

          // The timeline's filter: each event type belongs to one kind; unknown types count as "account".
          const KINDS = [
            { id: "account", label: "Account", types: ["UserRegistered", "UserDisabled", "UserEnabled", "EmailVerified", "PasswordSet"] },
            { id: "sign-in", label: "Sign-ins", types: ["SignedIn"] },
            { id: "session", label: "Sessions", types: ["SessionStarted", "SessionRefreshed", "SessionEnded", "SessionsRevoked"] },
            { id: "identity", label: "Identities", types: ["IdentityLinked", "IdentityUnlinked"] },
            { id: "mfa", label: "MFA", prefix: "MFA" },
            { id: "support", label: "Support", prefix: "Admin" },
            { id: "failure", label: "Failures", types: ["SignInFailed", "SignInThrottled", "SignInFailuresCounted", "MFACodeRejected", "MFACodeDeliveryFailed"] },
          ];

          const ACTIONS = {
            "disable": {
              button: "Disable…", confirm: "Disable", done: "disabled",
              explain: "They are signed out everywhere at once, and every sign-in is refused until they are enabled again.",
            },
            "enable": {
              button: "Enable…", confirm: "Enable", done: "enabled",
              explain: "They can sign in again. Sessions ended when they were disabled stay ended.",
            },
            "revoke-sessions": {
              button: "Revoke all sessions…", confirm: "Revoke all sessions", done: "signed out everywhere",
              explain: "Every session ends now and every token issued before now stops working; they can sign in again.",
            },
            // One item of a list, with its own button next to it: a session (a phone reported lost), an identity.
            "end-session": {
              button: "End…", confirm: "End", done: "signed out of that session",
              explain: "Tether refuses that session's tokens now; their other sessions go on. (A Firebase ID token a backend checks with firebase-admin lasts until it expires: revoke all sessions to stop those.)",
              item: (id) => ({ path: "/sessions/" + encodeURIComponent(id), name: "session " + short(id) + " of" }),
            },
            "unlink": {
              button: "Unlink…", confirm: "Unlink", done: "no longer signs in with that provider",
              explain: "That provider no longer signs them in, even when it was their last way in; their sessions go on.",
              item: (provider) => ({ path: "/identities/" + encodeURIComponent(provider), name: provider + " from" }),
            },
          };

          const state = {
            readOnly: sessionStorage.getItem(READ_ONLY_ITEM) === "1",
            search: null,
            results: [],
            resultsNext: null,
            userId: null,
            detail: null,
            events: [],
            nextAfter: null,
            historyLoading: false,
            hiddenKinds: new Set(),
            pending: null,
            busy: false,
            generation: 0,
          };

          const $ = (id) => document.getElementById(id);

          /// An element with attributes (or listeners, for on* names) and children; strings become Text nodes.
          function el(tag, attributes, ...children) {
            const node = document.createElement(tag);
            for (const [name, value] of Object.entries(attributes || {})) {
              if (value === null || value === undefined || value === false) continue;
              if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
              else if (name === "class") node.className = value;
              else node.setAttribute(name, value === true ? "" : String(value));
            }
            return fill(node, ...children);
          }

          /// Replaces the children of `node`, skipping absent ones (null, undefined, false).
          function fill(node, ...children) {
            node.replaceChildren(...children.flat().filter((child) => child !== null && child !== undefined && child !== false)
              .map((child) => (child instanceof Node ? child : String(child))));
            return node;
          }

          function when(iso) {
            return iso ? String(iso).replace("T", " ").replace(/(\.\d+)?Z$/, "") : "—";
          }

          function short(id) {
            return id ? String(id).slice(0, 8) : "—";
          }

          function kindOf(type) {
            for (const kind of KINDS) {
              if (kind.types && kind.types.includes(type)) return kind.id;
            }
            for (const kind of KINDS) {
              if (kind.prefix && type.startsWith(kind.prefix)) return kind.id;
            }
            return "account";
          }

          function actorText(actor, userId) {
            if (!actor) return "—";
            if (!actor.id) return actor.kind;
            if (actor.kind === "user" && actor.id === userId) return "self";
            const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(actor.id);
            return actor.kind + ":" + (uuid ? short(actor.id) : actor.id);
          }

          /// A fresh Idempotency-Key (crypto.randomUUID needs a secure context; this does not).
          function randomKey() {
            const bytes = crypto.getRandomValues(new Uint8Array(16));
            return Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
          }

          function userName(user) {
            return user.displayName || user.email || "(no name or email)";
          }

          function show(message, tone) {
            const status = $("status");
            status.textContent = message || "";
            status.className = "status" + (tone ? " " + tone : "");
            status.hidden = !message;
          }

          // MARK: The API

          class Refusal extends Error {
            constructor(status, problem) {
              super((problem && (problem.detail || problem.title)) || "The server answered " + status + ".");
              this.status = status;
              this.code = problem && problem.code;
            }
          }

          async function api(path, options) {
            const key = sessionStorage.getItem(KEY_ITEM);
            if (!key) throw new Refusal(401, { detail: "Sign in with an admin key first." });
            const headers = { "Authorization": "Bearer " + key, "Accept": "application/json" };
            const init = { method: "GET", headers, cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer" };
            if (options && options.json) {
              init.method = options.method || "POST";
              headers["Content-Type"] = "application/json";
              headers["Idempotency-Key"] = options.idempotencyKey;
              init.body = JSON.stringify(options.json);
            }
            let response;
            try {
              response = await fetch(path, init);
            } catch (error) {
              throw new Refusal(0, { detail: "The server could not be reached (" + error.message + ")." });
            }
            const text = await response.text();
            let body = null;
            try { body = text ? JSON.parse(text) : null; } catch (_) { body = null; }
            if (response.status === 401) {
              signOut("The server refused this key: " + ((body && body.detail) || "it is not valid or has been revoked") + " Sign in again.");
              throw new Refusal(401, body);
            }
            if (!response.ok) throw new Refusal(response.status, body);
            return body;
          }

          // MARK: Signing in and out

          function render() {
            const signedIn = Boolean(sessionStorage.getItem(KEY_ITEM));
            $("sign-in-view").hidden = signedIn;
            $("desk").hidden = !signedIn;
            $("who").hidden = !signedIn;
            $("key-note").textContent = state.readOnly ? "Signed in (support key: look only)" : "Signed in";
          }

          function signIn(event) {
            event.preventDefault();
            const input = $("key");
            const key = input.value.trim();
            input.value = "";
            if (!KEY_SHAPE.test(key)) {
              show("That is not an admin key: keys start with tadm_ and have 43 more characters.", "error");
              input.focus();
              return;
            }
            sessionStorage.setItem(KEY_ITEM, key);
            sessionStorage.removeItem(READ_ONLY_ITEM);
            state.readOnly = false;
            show("");
            render();
            $("query").focus();
          }

          function signOut(message) {
            sessionStorage.removeItem(KEY_ITEM);
            sessionStorage.removeItem(READ_ONLY_ITEM);
            state.generation += 1;
            Object.assign(state, {
              readOnly: false, search: null, results: [], resultsNext: null, userId: null, detail: null,
              events: [], nextAfter: null, pending: null, busy: false, webhooksAsked: false,
            });
            $("query").value = "";
            $("results").hidden = true;
            fill($("result-list"), );
            $("webhooks").hidden = true;
            showUser(false);
            render();
            show(typeof message === "string" ? message : "Signed out.", typeof message === "string" ? "error" : "ok");
            $("key").focus();
          }

          // MARK: Search

          /// The API's criteria for what was typed: an email, provider:uid, or free text.
          function criteria(text) {
            const params = new URLSearchParams();
            const pair = /^([a-z]+):(.+)$/i.exec(text);
            if (/^[^\s@:]+@[^\s@]+$/.test(text)) {
              params.set("email", text);
              return { params, label: "email " + text };
            }
            if (pair && PROVIDERS.includes(pair[1].toLowerCase())) {
              params.set("provider", pair[1].toLowerCase());
              params.set("uid", pair[2]);
              return { params, label: pair[1].toLowerCase() + " uid " + pair[2] };
            }
            params.set("q", text);
            return { params, label: "“" + text + "”" };
          }

          async function search(event) {
            event.preventDefault();
            const text = $("query").value.trim();
            if (!text) {
              show("Type an email, provider:uid, a user id, or a word of a name.", "error");
              return;
            }
            state.search = criteria(text);
            state.results = [];
            state.resultsNext = null;
            await loadResults();
          }

          async function loadResults() {
            const params = new URLSearchParams(state.search.params);
            params.set("limit", String(RESULTS_PAGE));
            if (state.resultsNext) params.set("after", state.resultsNext);
            try {
              const page = await api("/v1/admin/users?" + params.toString());
              state.results = state.results.concat(page.users);
              state.resultsNext = page.nextAfter;
              show("");
              renderResults();
              if (!state.webhooksAsked) loadWebhooks(); // once, after the key has proved itself
            } catch (error) {
              if (error.status !== 401) show(error.message, "error");
            }
          }

          function renderResults() {
            const found = state.results.length;
            $("results").hidden = false;
            $("results-title").textContent = (found === 0 ? "No user" : found === 1 ? "1 user" : found + " users")
              + (state.resultsNext ? " so far" : "") + " for " + state.search.label;
            fill($("result-list"), ...state.results.map((user) => el("li", null,
              el("button", {
                type: "button", class: "result", "data-user-id": user.id,
                "aria-current": user.id === state.userId ? "true" : "false",
                onclick: () => openUser(user.id),
              },
                el("strong", null, userName(user)),
                el("span", { class: "meta" }, [user.displayName ? user.email : null, user.providers.join(", ") || "no identity"]
                  .filter(Boolean).join(" · ")),
                el("span", { class: "meta" }, user.disabled ? el("span", { class: "badge disabled" }, "Disabled") : null,
                  (user.disabled ? " " : "") + "created " + when(user.createdAt).slice(0, 10)
                  + (user.lastSignInAt ? " · last sign-in " + when(user.lastSignInAt).slice(0, 10) : "")),
              ))));
            $("more-results").hidden = !state.resultsNext;
          }

          // MARK: One user

          function showUser(visible) {
            $("placeholder").hidden = visible;
            for (const id of ["user", "timeline"]) $(id).hidden = !visible;
          }

          async function openUser(id) {
            state.generation += 1;
            const generation = state.generation;
            Object.assign(state, { userId: id, detail: null, events: [], nextAfter: null, historyLoading: true, pending: null });
            for (const button of document.querySelectorAll(".result")) {
              button.setAttribute("aria-current", button.dataset.userId === id ? "true" : "false");
            }
            showUser(true);
            fill($("user"), el("p", { class: "muted" }, "Loading…"));
            renderTimeline();
            // The card first, so that the timeline includes this very look at the user.
            await loadDetail(generation);
            await loadHistory(generation);
          }

          async function loadDetail(generation) {
            try {
              const detail = await api("/v1/admin/users/" + encodeURIComponent(state.userId));
              if (generation !== state.generation) return;
              state.detail = detail;
              renderUser();
              renderActions();
            } catch (error) {
              if (generation !== state.generation || error.status === 401) return;
              fill($("user"), el("p", { class: "none" }, error.message));
            }
          }

          function table(headings, rows) {
            return el("table", null,
              el("thead", null, el("tr", null, headings.map((heading) => el("th", { scope: "col" }, heading)))),
              el("tbody", null, rows));
          }

          function fact(label, value, wide) {
            return el("div", { class: wide ? "wide" : null }, el("dt", null, label), el("dd", null, value));
          }

          /// A list of `entries`, each with a main line and a line of details; `none` when there are none.
          function items(entries, none) {
            if (entries.length === 0) return el("p", { class: "none" }, none);
            return el("ul", { class: "items" }, entries.map((entry) => el("li", { class: entry.live ? "live" : null },
              el("div", { class: "item-main" }, entry.main),
              el("div", { class: "item-meta" }, entry.meta.filter(Boolean).join(" · ")))));
          }

          function verified(email, isVerified) {
            return email ? email + (isVerified ? " (verified)" : " (unverified)") : null;
          }

          function sessionItem(session) {
            return {
              live: session.active,
              main: [el("span", { class: "mono", title: session.id }, short(session.id)), " ", (session.amr || []).join(", ") || "—"],
              meta: [
                "started " + when(session.startedAt),
                session.lastRefreshedAt ? "refreshed " + when(session.lastRefreshedAt) : null,
                session.dpopBound ? "DPoP-bound" : null,
                session.active ? null : "ended " + when(session.endedAt) + (session.endReason ? " (" + session.endReason + ")" : ""),
              ],
            };
          }

          // `item` with a button that asks to confirm `action` on `target` (a session's id, a provider).
          function withAction(item, action, target) {
            if (state.detail.erasedAt) return item;
            item.main.push(" ", el("button", {
              type: "button", class: "item-action", "data-action": action, "data-target": target,
              disabled: state.readOnly || state.busy,
              onclick: () => { state.pending = { action, target, idempotencyKey: randomKey() }; renderActions(); $("reason").focus(); },
            }, ACTIONS[action].button));
            return item;
          }

          function renderUser() {
            const detail = state.detail;
            const user = detail.user;
            const active = detail.sessions.filter((session) => session.active);
            const ended = detail.sessions.filter((session) => !session.active);
            fill($("user"),
              el("div", { class: "user-head" },
                el("h2", { id: "user-name" }, userName(user)),
                el("span", { id: "user-status", class: "badge " + (detail.erasedAt || user.disabled ? "disabled" : "active") },
                  detail.erasedAt ? "Erased" : user.disabled ? "Disabled" : "Active")),
              el("p", { class: "user-id mono" }, user.id),
              el("dl", { class: "facts" },
                fact("Email", verified(user.email, user.emailVerified) || "none", true),
                fact("Created", when(user.createdAt)),
                fact("Last sign-in", when(user.lastSignInAt)),
                fact("Active sessions", String(detail.activeSessionCount)),
                fact("Tokens valid since", detail.validSince ? when(detail.validSince) : "any time")),
              el("h3", null, "Identities (" + user.identities.length + ")"),
              items(user.identities.map((identity) => {
                const item = {
                  main: [el("strong", null, identity.provider), " ", el("span", { class: "mono uid" }, identity.uid)],
                  meta: [verified(identity.email, identity.emailVerified), "linked " + when(identity.linkedAt)],
                };
                // A developer's uid (Firebase custom tokens) and an anonymous user's id are never unlinked.
                return ["custom", "anonymous"].includes(identity.provider) ? item : withAction(item, "unlink", identity.provider);
              }), "No linked identity."),
              el("h3", null, "Active sessions (" + detail.activeSessionCount + ")"),
              items(active.map((session) => withAction(sessionItem(session), "end-session", session.id)), "No active session."),
              ended.length === 0 ? null : el("details", null,
                el("summary", null, ended.length + " ended session" + (ended.length === 1 ? "" : "s")),
                items(ended.map(sessionItem), "")),
              el("h3", null, "Second factors (" + detail.factors.length + ")"),
              items(detail.factors.map((factor) => ({
                main: [el("strong", null, factor.type), factor.displayName ? " " + factor.displayName : null],
                meta: [factor.phoneHint, "confirmed " + when(factor.confirmedAt)],
              })), "No second factor."),
              el("section", { id: "actions", class: "actions" }));
          }

          // MARK: Actions

          function renderActions() {
            const user = state.detail.user;
            if (state.detail.erasedAt) {
              fill($("actions"), el("h3", null, "Actions"),
                el("p", { class: "none", id: "erased-note" }, "Erased " + when(state.detail.erasedAt) + ": nothing is left to act on."));
              return;
            }
            const offered = [user.disabled ? "enable" : "disable", "revoke-sessions"];
            fill($("actions"),
              el("h3", null, "Actions"),
              state.readOnly ? el("p", { class: "read-only", id: "read-only-note" },
                "This is a support key: it can look, not act. Disabling, enabling, revoking or ending sessions and unlinking need a key made with ",
                el("code", null, "tether admin-keys create --role admin"), ".") : null,
              el("div", { class: "action-row" }, offered.map((action) => el("button", {
                type: "button", "data-action": action, disabled: state.readOnly || state.busy,
                onclick: () => { state.pending = { action, idempotencyKey: randomKey() }; renderActions(); $("reason").focus(); },
              }, ACTIONS[action].button))),
              state.pending && !state.readOnly ? confirmation(user) : null);
          }

          function confirmation(user) {
            const action = ACTIONS[state.pending.action];
            return el("form", { class: "confirm", id: "confirm", method: "post", onsubmit: confirmAction },
              el("p", null, el("strong", null, action.confirm + " "
                + (state.pending.target ? action.item(state.pending.target).name + " " : "") + userName(user) + "?"), " ", action.explain),
              el("label", { for: "reason" }, "Reason (recorded in the history)"),
              // A retry after a failure keeps the reason: its Idempotency-Key is the same, so must its body be.
              el("textarea", { id: "reason", maxlength: String(REASON_LIMIT), placeholder: "e.g. reported a stolen phone, ticket 1234" },
                state.pending.reason || ""),
              el("div", { class: "action-row" },
                el("button", { type: "submit", class: "danger", disabled: state.busy }, action.confirm),
                el("button", { type: "button", disabled: state.busy, onclick: () => { state.pending = null; renderActions(); } }, "Cancel")));
          }

          async function confirmAction(event) {
            event.preventDefault();
            const reason = $("reason").value.trim();
            if (!reason) {
              show("Give a reason: it is recorded with the action.", "error");
              $("reason").focus();
              return;
            }
            const { action, target, idempotencyKey } = state.pending;
            state.pending.reason = reason;
            const generation = state.generation;
            const name = userName(state.detail.user);
            state.busy = true;
            for (const button of $("user").querySelectorAll("#actions button, button[data-action]")) button.disabled = true;
            const path = "/v1/admin/users/" + encodeURIComponent(state.userId)
              + (target ? ACTIONS[action].item(target).path : "/" + action);
            try {
              await api(path, { json: { reason }, idempotencyKey, method: target ? "DELETE" : "POST" });
              state.busy = false;
              state.pending = null;
              show(name + " " + ACTIONS[action].done + ".", "ok");
              if (generation === state.generation) await openUser(state.userId);
              else renderCard();  // another user, opened meanwhile, was drawn with its buttons disabled
            } catch (error) {
              state.busy = false;
              if (error.status === 401) return;
              if (error.status === 403) {
                state.readOnly = true;
                sessionStorage.setItem(READ_ONLY_ITEM, "1");
                state.pending = null;
                render();
                show("Refused: this key has the support role, which can look but not act.", "error");
              } else if (error.status === 404 || error.status === 422) {
                // What was asked no longer holds (a session ended or an identity unlinked meanwhile): the card is
                // drawn again from the server, and the next try is a new request.
                state.pending = null;
                show(error.message, "error");
                if (generation === state.generation) await openUser(state.userId);
                else renderCard();
                return;
              } else {
                show(error.message, "error");
              }
              renderCard();
            }
          }

          // The user's card and its actions again, with the buttons the request disabled enabled.
          function renderCard() {
            if (!state.detail) return;
            renderUser();
            renderActions();
          }

          // MARK: Timeline

          async function loadHistory(generation) {
            const params = new URLSearchParams({ limit: String(HISTORY_PAGE) });
            if (state.nextAfter !== null) params.set("after", String(state.nextAfter));
            $("load-more").disabled = true;
            try {
              const page = await api("/v1/admin/users/" + encodeURIComponent(state.userId) + "/history?" + params.toString());
              if (generation !== state.generation) return;
              state.events = state.events.concat(page.events);
              state.nextAfter = page.nextAfter;
              state.historyLoading = false;
              renderTimeline();
            } catch (error) {
              if (generation !== state.generation || error.status === 401) return;
              fill($("events"), el("p", { class: "none" }, error.message));
            } finally {
              $("load-more").disabled = false;
            }
          }

          function renderFilters() {
            const counts = {};
            for (const entry of state.events) counts[kindOf(entry.type)] = (counts[kindOf(entry.type)] || 0) + 1;
            fill($("filters"), ...KINDS.map((kind) => el("label", { class: "chip k-" + kind.id },
              el("input", {
                type: "checkbox", name: "kind", value: kind.id, checked: !state.hiddenKinds.has(kind.id),
                onchange: (event) => {
                  if (event.target.checked) state.hiddenKinds.delete(kind.id); else state.hiddenKinds.add(kind.id);
                  renderTimeline();
                },
              }),
              el("span", { class: "dot" }), kind.label, el("span", { class: "count" }, String(counts[kind.id] || 0)))));
          }

          function renderTimeline() {
            renderFilters();
            let shown = state.events.filter((entry) => !state.hiddenKinds.has(kindOf(entry.type)));
            if ($("order").value === "newest") shown = shown.slice().reverse();
            const loaded = state.events.length;
            if (state.historyLoading && loaded === 0) {
              fill($("events"), el("p", { class: "muted" }, "Loading…"));
            } else if (shown.length === 0) {
              fill($("events"), el("p", { class: "none" },
                loaded === 0 ? "No events." : "None of the " + loaded + " events loaded is of the kinds chosen."));
            } else {
              fill($("events"), table(["Time", "Event", "Summary", "Actor", "Surface", "Client IP"], shown.map((entry) =>
                el("tr", { class: "k-" + kindOf(entry.type), "data-type": entry.type },
                  el("td", { class: "time", title: entry.time }, when(entry.time)),
                  el("td", null, el("span", { class: "event-type" }, el("span", { class: "dot" }), entry.type)),
                  el("td", null, entry.summary),
                  el("td", { class: "nowrap" }, actorText(entry.actor, state.userId)),
                  el("td", null, entry.surface || "—"),
                  el("td", { class: "ip", title: entry.userAgent || null }, entry.clientIP || "—")))));
            }
            const hidden = loaded - state.events.filter((entry) => !state.hiddenKinds.has(kindOf(entry.type))).length;
            $("loaded").textContent = loaded + " event" + (loaded === 1 ? "" : "s") + " loaded"
              + (hidden ? ", " + hidden + " hidden by the filter" : "") + (state.nextAfter !== null ? "; later ones not yet" : "");
            $("load-more").hidden = state.nextAfter === null;
          }

          // MARK: Webhooks

          /// With an admin key, the webhook subscriptions that need someone: the failing and disabled ones.
          async function loadWebhooks() {
            state.webhooksAsked = true;
            let body;
            try {
              body = await api("/v1/admin/webhooks");
            } catch (_) {
              $("webhooks").hidden = true; // a support key may not see them
              return;
            }
            const hooks = body.webhooks || [];
            $("webhooks").hidden = hooks.length === 0;
            const troubled = hooks.filter((hook) => hook.status !== "active");
            fill($("webhook-list"),
              troubled.map((hook) => el("li", { class: "webhook " + hook.status, "data-webhook-id": hook.id },
                el("strong", {}, hook.status), " ", hook.url,
                hook.statusReason ? el("span", { class: "hint" }, " — " + hook.statusReason) : null)),
              troubled.length === 0 ? el("li", { class: "hint" }, hooks.length + " delivering, none failing") : null);
          }

          // MARK: Start

          function start() {
            $("sign-in").addEventListener("submit", signIn);
            $("sign-out").addEventListener("click", () => signOut());
            $("search").addEventListener("submit", search);
            $("more-results").addEventListener("click", loadResults);
            $("load-more").addEventListener("click", () => loadHistory(state.generation));
            $("order").addEventListener("change", renderTimeline);
            render();
            if (sessionStorage.getItem(KEY_ITEM)) loadWebhooks();
            (sessionStorage.getItem(KEY_ITEM) ? $("query") : $("key")).focus();
          }

          start();
        })();

        """#
}
