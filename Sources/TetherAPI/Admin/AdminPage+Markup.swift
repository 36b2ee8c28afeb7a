extension AdminPage {
    /// `GET /admin`: the page's skeleton; `app.js` fills it from the API.
    static let markup = #"""
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="referrer" content="no-referrer">
        <title>Tether support</title>
        <link rel="icon" href="data:,">
        <link rel="stylesheet" href="/admin/app.css">
        <script src="/admin/app.js" defer></script>
        </head>
        <body>
        <header class="bar">
          <h1>Tether <span>support</span></h1>
          <div id="who" class="who" hidden>
            <span id="key-note"></span>
            <button type="button" id="sign-out" class="quiet">Sign out</button>
          </div>
        </header>
        <p id="status" class="status" role="status" aria-live="polite" hidden></p>

        <main id="sign-in-view" class="sign-in-view" hidden>
          <form id="sign-in" class="card" method="post" autocomplete="off">
            <h2>Sign in</h2>
            <p>Paste an admin key. It stays in this browser tab (session storage) until you sign out or close the tab,
              and is sent only to this server's <code>/v1/admin</code> API.</p>
            <label for="key">Admin key</label>
            <input id="key" name="key" type="password" placeholder="tadm_…" spellcheck="false" autocomplete="off" required>
            <p class="hint">An operator makes one with <code>tether admin-keys create --role support</code> (look only)
              or <code>--role admin</code> (also disable, enable and revoke sessions).</p>
            <button type="submit" class="primary">Sign in</button>
          </form>
        </main>

        <main id="desk" class="desk" hidden>
          <section class="side">
            <form id="search" class="card" method="post" role="search" autocomplete="off">
              <label for="query">Find a user</label>
              <div class="search-row">
                <input id="query" name="query" type="search" placeholder="ada@example.com" spellcheck="false">
                <button type="submit" class="primary">Search</button>
              </div>
              <p class="hint">An email, <code>provider:uid</code> (<code>apple:0001…</code>), a user id, or a whole word of a name, email or uid.</p>
            </form>
            <section id="results" class="card" hidden>
              <h2 id="results-title">Results</h2>
              <ol id="result-list" class="results"></ol>
              <button type="button" id="more-results" hidden>More results</button>
            </section>
            <article id="user" class="card" hidden></article>
            <section id="webhooks" class="card" hidden>
              <h2>Webhooks</h2>
              <ul id="webhook-list" class="webhooks"></ul>
            </section>
          </section>
          <section class="detail">
            <div id="placeholder" class="card placeholder">
              <p>Search for a user, then pick one to see their card, what happened to their account, and who looked at it.</p>
            </div>
            <section id="timeline" class="card" hidden>
              <div class="timeline-head">
                <h2>Timeline</h2>
                <span class="muted">times in UTC</span>
                <label class="order">Order
                  <select id="order">
                    <option value="oldest">oldest first</option>
                    <option value="newest">newest first</option>
                  </select>
                </label>
              </div>
              <div id="filters" class="filters" role="group" aria-label="Event kinds shown"></div>
              <div id="events"></div>
              <div class="timeline-foot">
                <span id="loaded" class="muted"></span>
                <button type="button" id="load-more" hidden>Load later events</button>
              </div>
            </section>
          </section>
        </main>
        <noscript><p class="status error">This page needs JavaScript.</p></noscript>
        </body>
        </html>

        """#

    /// `GET /admin/app.css`: a two-column desk for a laptop screen, one column on narrow ones.
    static let styleSheet = #"""
        :root {
          --bg: #f3f4f6; --card: #fff; --line: #e1e4ea; --soft: #eef0f4; --text: #1c2230; --muted: #5b6474;
          --accent: #2f5bd3; --accent-soft: #e8eefc; --danger: #b42318; --danger-soft: #fdecea; --ok: #067647; --ok-soft: #e7f6ec;
          --mono: ui-monospace, "SFMono-Regular", Menlo, Consolas, "DejaVu Sans Mono", monospace;
        }
        * { box-sizing: border-box; }
        [hidden] { display: none !important; }
        html { font-size: 15px; }
        body { margin: 0; background: var(--bg); color: var(--text); line-height: 1.45;
          font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, "DejaVu Sans", sans-serif; }
        code, .mono { font-family: var(--mono); font-size: 0.88em; }
        h1, h2, h3 { margin: 0; line-height: 1.25; }
        h2 { font-size: 1.15rem; }
        h3 { font-size: 0.8rem; text-transform: uppercase; letter-spacing: 0.04em; color: var(--muted); margin: 1.1rem 0 0.4rem; }
        button, input, select, textarea { font: inherit; color: inherit; }
        button { cursor: pointer; border: 1px solid var(--line); background: #fff; border-radius: 6px; padding: 0.35rem 0.8rem; }
        button:hover:not(:disabled) { border-color: #c4cad6; background: #f8f9fb; }
        button:disabled { cursor: not-allowed; opacity: 0.55; }
        button.primary { background: var(--accent); border-color: var(--accent); color: #fff; }
        button.primary:hover:not(:disabled) { background: #264bb0; }
        button.danger { background: var(--danger); border-color: var(--danger); color: #fff; }
        button.danger:hover:not(:disabled) { background: #931d13; }
        button.quiet { background: transparent; border-color: rgba(255, 255, 255, 0.35); color: #fff; }
        input, textarea, select { border: 1px solid #c9ced8; border-radius: 6px; padding: 0.4rem 0.55rem; background: #fff; }
        input:focus, textarea:focus, select:focus, button:focus-visible { outline: 2px solid var(--accent); outline-offset: 1px; }
        label { font-weight: 600; display: block; margin-bottom: 0.3rem; }

        .bar { display: flex; align-items: center; justify-content: space-between; gap: 1rem;
          background: #1c2230; color: #fff; padding: 0.6rem 1.25rem; }
        .bar h1 { font-size: 1.1rem; }
        .bar h1 span { font-weight: 400; opacity: 0.7; }
        .who { display: flex; align-items: center; gap: 0.75rem; font-size: 0.9rem; }
        .who span { opacity: 0.85; }
        .status { margin: 0.75rem auto 0; max-width: 1600px; width: calc(100% - 2.5rem); padding: 0.55rem 0.9rem;
          border-radius: 6px; background: var(--accent-soft); border: 1px solid #c7d5f7; }
        .status.error { background: var(--danger-soft); border-color: #f5c2bd; color: #7a1a10; }
        .status.ok { background: var(--ok-soft); border-color: #b7e3c5; color: #05502f; }

        .card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 1rem 1.1rem;
          box-shadow: 0 1px 2px rgba(16, 24, 40, 0.04); }
        .muted, .hint { color: var(--muted); }
        .webhooks { list-style: none; margin: 0; padding: 0; }
        .webhook { padding: .25rem 0; overflow-wrap: anywhere; }
        .webhook.failing strong, .webhook.disabled strong { color: #a4161a; }
        .hint { font-size: 0.85rem; margin: 0.5rem 0 0; }

        .sign-in-view { display: flex; justify-content: center; padding: 3rem 1rem; }
        .sign-in-view form { width: 30rem; display: grid; gap: 0.6rem; }
        .sign-in-view form p { margin: 0; }
        .sign-in-view input { width: 100%; font-family: var(--mono); }
        .sign-in-view button { justify-self: start; }

        .desk { display: grid; grid-template-columns: minmax(20rem, 26rem) minmax(0, 1fr); gap: 1rem;
          max-width: 1600px; margin: 0 auto; padding: 1rem 1.25rem 2rem; align-items: start; }
        .side { position: sticky; top: 1rem; display: grid; gap: 1rem; max-height: calc(100vh - 2rem); overflow: auto; }
        .detail { display: grid; gap: 1rem; min-width: 0; }
        @media (max-width: 900px) {
          .desk { grid-template-columns: 1fr; }
          .side { position: static; max-height: none; }
        }

        .search-row { display: flex; gap: 0.5rem; }
        .search-row input { flex: 1; min-width: 0; }
        .results { list-style: none; margin: 0.6rem 0 0; padding: 0; display: grid; gap: 0.25rem; max-height: 16rem; overflow: auto; }
        .result { width: 100%; text-align: left; display: grid; gap: 0.1rem; border-color: transparent; padding: 0.5rem 0.6rem; }
        .result:hover:not(:disabled) { background: #f5f7fb; border-color: var(--line); }
        .result[aria-current="true"] { background: var(--accent-soft); border-color: #c7d5f7; }
        .result strong { overflow-wrap: anywhere; }
        .result .meta { font-size: 0.82rem; color: var(--muted); }
        #more-results { margin-top: 0.6rem; }
        .placeholder { color: var(--muted); }
        .placeholder p { margin: 0; }

        .user-head { display: flex; align-items: baseline; justify-content: space-between; gap: 0.75rem; }
        .user-head h2 { font-size: 1.3rem; overflow-wrap: anywhere; }
        .badge { display: inline-block; font-size: 0.75rem; font-weight: 600; padding: 0.1rem 0.5rem; border-radius: 999px; }
        .badge.active { background: var(--ok-soft); color: var(--ok); }
        .badge.disabled { background: var(--danger-soft); color: var(--danger); }
        .user-id { margin: 0.2rem 0 0; color: var(--muted); font-size: 0.8rem; overflow-wrap: anywhere; }
        .facts { display: grid; grid-template-columns: 1fr 1fr; gap: 0.45rem 1rem; margin: 0.8rem 0 0; }
        .facts div { min-width: 0; }
        .facts .wide { grid-column: 1 / -1; }
        .facts dt { font-size: 0.78rem; color: var(--muted); }
        .facts dd { margin: 0; overflow-wrap: anywhere; }
        .none { color: var(--muted); margin: 0; }
        .items { list-style: none; margin: 0; padding: 0; display: grid; gap: 0.45rem; }
        .items li { border-left: 3px solid var(--soft); padding-left: 0.55rem; min-width: 0; }
        .items li.live { border-left-color: #9fd8b5; }
        .item-main { overflow-wrap: anywhere; }
        .item-main button.item-action { padding: 0.05rem 0.5rem; font-size: 0.85em; margin-left: 0.25rem; }
        .item-meta { font-size: 0.82rem; color: var(--muted); overflow-wrap: anywhere; }
        .uid { font-size: 0.8rem; }
        details { margin-top: 0.4rem; }
        summary { cursor: pointer; color: var(--muted); font-size: 0.88rem; }

        table { width: 100%; border-collapse: collapse; font-size: 0.87rem; }
        th { text-align: left; font-size: 0.75rem; font-weight: 600; color: var(--muted); text-transform: uppercase;
          letter-spacing: 0.03em; padding: 0.35rem 0.5rem; border-bottom: 1px solid var(--line); }
        td { padding: 0.35rem 0.5rem; border-bottom: 1px solid var(--soft); vertical-align: top; overflow-wrap: anywhere; }
        tr:last-child td { border-bottom: 0; }
        th, td.nowrap, td.time, td.ip { white-space: nowrap; overflow-wrap: normal; }
        td.time, td.ip { font-family: var(--mono); font-size: 0.8rem; }

        .actions { margin-top: 1.1rem; padding-top: 0.9rem; border-top: 1px solid var(--line); }
        .action-row { display: flex; gap: 0.5rem; flex-wrap: wrap; }
        .read-only { margin: 0 0 0.6rem; padding: 0.5rem 0.75rem; background: var(--soft); border-radius: 6px; color: var(--muted); }
        .confirm { margin-top: 0.8rem; border: 1px solid #f5c2bd; background: #fff8f7; border-radius: 8px; padding: 0.8rem 0.9rem;
          display: grid; gap: 0.5rem; }
        .confirm p { margin: 0; }
        .confirm textarea { width: 100%; min-height: 4.2rem; resize: vertical; }

        .timeline-head { display: flex; align-items: baseline; gap: 0.75rem; }
        .timeline-head .order { margin: 0 0 0 auto; font-weight: 400; color: var(--muted); font-size: 0.88rem; }
        .filters { display: flex; flex-wrap: wrap; gap: 0.4rem; margin: 0.75rem 0 0.6rem; }
        .chip { display: inline-flex; align-items: center; gap: 0.35rem; margin: 0; font-weight: 400; font-size: 0.85rem;
          border: 1px solid var(--line); border-radius: 999px; padding: 0.15rem 0.6rem 0.15rem 0.45rem; cursor: pointer; user-select: none; }
        .chip:has(input:not(:checked)) { opacity: 0.5; }
        .chip input { margin: 0; }
        .chip .count { color: var(--muted); font-variant-numeric: tabular-nums; }
        .dot { display: inline-block; width: 0.55rem; height: 0.55rem; border-radius: 50%; background: #6b7280; flex: none; }
        .event-type { display: inline-flex; align-items: center; gap: 0.4rem; white-space: nowrap; font-weight: 600; }
        .k-account .dot, .dot.k-account { background: #6b7280; }
        .k-sign-in .dot, .dot.k-sign-in { background: #2563eb; }
        .k-session .dot, .dot.k-session { background: #0891b2; }
        .k-identity .dot, .dot.k-identity { background: #7c3aed; }
        .k-mfa .dot, .dot.k-mfa { background: #c2410c; }
        .k-support .dot, .dot.k-support { background: #a16207; }
        .k-failure .dot, .dot.k-failure { background: #dc2626; }
        tr.k-failure td { background: #fff7f6; }
        .timeline-foot { display: flex; align-items: center; justify-content: space-between; gap: 1rem; margin-top: 0.6rem; }

        """#
}
