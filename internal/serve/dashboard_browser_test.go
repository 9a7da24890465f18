package serve

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/internal/browsertest"
	"github.com/claimstream/claimstream/provider/rest/dashboard"
)

// TestDashboardInABrowser drives serve's dashboard with a real headless
// Chromium while the simulator plays a scenario: the pages refuse without
// the token, a login opens them, a claim made through the API is seen to
// go from pending to ready on the pool page without a reload, its slot's
// timeline and its story show, and a logout closes everything again.
// Screenshots of each page go to $CLAIMSTREAM_BROWSER_ARTIFACTS.
func TestDashboardInABrowser(t *testing.T) {
	browser := browsertest.Start(t, 1280, 900)
	shots := browsertest.ArtifactDir(t)

	apiAddr := freeAddr(t)
	o := serveOptions{
		config: filepath.Join("..", "..", "deploy", "examples", "pool.yaml"), configPoll: time.Hour, dataDir: t.TempDir(), stream: "CLAIMSTREAM",
		noFsync: true, logLevel: "warn", apiAddress: apiAddr,
		cluster: clusterOptions{scenario: filepath.Join("testdata", "dashboard-scenario.yaml"), namespace: "claimstream", seed: 1},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	base := "http://" + apiAddr
	eventstest.CheckFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz %d", resp.StatusCode)
		}
		return nil
	})
	raw, err := os.ReadFile(filepath.Join(o.dataDir, apiTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	apiToken := strings.TrimSpace(string(raw))

	// Without the token: the API refuses, the pages send to the login.
	for _, p := range []string{"/api/v1/groups", "/api/v1/timeline", "/api/v1/events/stream"} {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s without a token: %d", p, resp.StatusCode)
		}
	}
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		rctx, rcancel := context.WithTimeout(browser, 60*time.Second)
		defer rcancel()
		if err := chromedp.Do(rctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	location := func() string {
		t.Helper()
		loc, err := chromedp.Run(browser, chromedp.Location())
		if err != nil {
			t.Fatal(err)
		}
		return loc
	}
	getCookies := func() []*network.Cookie {
		t.Helper()
		ck, err := chromedp.Run(browser, chromedp.Action[[]*network.Cookie](func(ctx context.Context, tg *chromedp.Target) ([]*network.Cookie, error) {
			r, err := cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{})
			return r.Cookies, err
		}))
		if err != nil {
			t.Fatal(err)
		}
		return ck
	}
	eval := func(expr string) any {
		t.Helper()
		v, err := chromedp.Run(browser, chromedp.Evaluate[any](expr, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}
	token := chromedp.ID("token")
	run("open the pool without a session", chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(token))
	loc := location()
	if !strings.Contains(loc, "/ui/login") {
		t.Fatalf("the pool without a session is at %s, want the login", loc)
	}
	browsertest.Screenshot(t, browser, shots, "login")

	// The CSP and the other headers, as the browser got them.
	resp, err := http.Get(base + "/ui/login")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); csp != dashboard.ContentSecurityPolicy {
		t.Fatalf("CSP %q", csp)
	}

	// A wrong token is refused; the right one opens the pool.
	run("wrong token", chromedp.SendKeys(token, "not-the-token"), chromedp.Submit(token), chromedp.WaitVisible(chromedp.ID("login-error")))
	run("log in", chromedp.SendKeys(token, apiToken), chromedp.Submit(token))
	browsertest.WaitJS(t, browser, 30*time.Second, "the pool page", `location.pathname === "/ui/" && document.querySelector('#groups[aria-busy="false"] a.slot[data-slot="node-3.lan"]') !== null`)
	cookies := getCookies()
	if len(cookies) != 1 || cookies[0].Name != dashboard.CookieName || !cookies[0].HTTPOnly || cookies[0].SameSite != network.CookieSameSiteStrict || cookies[0].Value == apiToken {
		t.Fatalf("cookies %+v: want one HttpOnly SameSite=Strict session cookie that is not the token", cookies)
	}
	if scriptSees := eval(`document.cookie`); scriptSees != "" {
		t.Fatalf("a script reads the cookie: %q", scriptSees)
	}

	// Watch node-3.lan's tile; a claim made now must show pending, then
	// ready, on this same page (no reload: the marker stays).
	eval(`window.__noReload = true; window.__phases = [];
		new MutationObserver((ms) => { for (const m of ms) window.__phases.push(m.target.dataset.phase); })
			.observe(document.querySelector('a.slot[data-slot="node-3.lan"]'), {attributes: true, attributeFilter: ["data-phase"]}); true`)
	req, _ := http.NewRequest("POST", base+"/api/v1/slots/node-3.lan/claim", strings.NewReader(`{"by":"browser-test","reason":"watch it boot"}`))
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("claim node-3.lan: %d", resp.StatusCode)
	}
	browsertest.WaitJS(t, browser, 10*time.Second, "node-3.lan shown pending", `window.__phases.includes("pending")`)
	browsertest.Screenshot(t, browser, shots, "pool-pending")
	browsertest.WaitJS(t, browser, 90*time.Second, "node-3.lan shown ready", `document.querySelector('a.slot[data-slot="node-3.lan"]').dataset.phase === "ready"`)
	phases, err := chromedp.Run(browser, chromedp.Evaluate[[]string](`window.__phases`))
	if err != nil {
		t.Fatal(err)
	}
	noReload := eval(`window.__noReload === true`) == true
	if !noReload || indexOf(phases, "pending") < 0 || indexOf(phases, "pending") > indexOf(phases, "ready") {
		t.Fatalf("node-3.lan's tile went %v (reload: %v), want pending before ready on the same page", phases, !noReload)
	}
	t.Logf("node-3.lan's tile went %v", phases)
	// The scenario's claims: node-1.lan came up, node-2.lan's wake failed.
	browsertest.WaitJS(t, browser, 60*time.Second, "node-1.lan ready, node-2.lan failed", `document.querySelector('a.slot[data-slot="node-1.lan"]').dataset.phase === "ready" && document.querySelector('a.slot[data-slot="node-2.lan"]').dataset.phase === "failed"`)
	browsertest.Screenshot(t, browser, shots, "pool")

	// By keyboard: Tab first reaches the skip link; a focused tile shows a
	// focus ring, and Enter opens its slot page, which tells the story;
	// its live claim links to the claim page.
	run("tab", chromedp.KeyEvent("\t"))
	if cls := eval(`document.activeElement.className`); cls != "skip" {
		t.Fatalf("the first Tab focuses %q, want the skip link", cls)
	}
	eval(`document.querySelector('a.slot[data-slot="node-3.lan"]').focus(); true`)
	if ring := eval(`getComputedStyle(document.activeElement).outlineStyle`); ring == "none" {
		t.Fatal("a focused slot tile shows no focus ring")
	}
	run("slot page", chromedp.KeyEvent("\r"))
	browsertest.WaitJS(t, browser, 30*time.Second, "the slot's story", `document.body.dataset.phase === "ready" && document.querySelectorAll("#story tbody tr").length >= 3 && document.querySelector("#story").innerText.includes("browser-test")`)
	browsertest.Screenshot(t, browser, shots, "slot")
	run("claim page", chromedp.Click(chromedp.CSS(`#slot a[href^="/ui/claims/"]`)))
	browsertest.WaitJS(t, browser, 30*time.Second, "the claim's story", `location.pathname.startsWith("/ui/claims/node-3.lan-") && document.body.dataset.phase === "ready" && document.querySelector("#claim").innerText.includes("browser-test") && document.querySelectorAll("#story tbody tr").length >= 3`)
	browsertest.Screenshot(t, browser, shots, "claim")

	// Its timeline: the slot's row, the cursor on it showing it ready.
	run("timeline", chromedp.Click(chromedp.CSS(`#claim a[href^="/ui/timeline"]`)))
	browsertest.WaitJS(t, browser, 30*time.Second, "the timeline drawn with the cursor on node-3.lan", `document.body.dataset.firstDrawMs !== undefined && document.querySelector("#cursor-slot") !== null && document.querySelector("#cursor-slot").innerText.includes("ready")`)
	if text := eval(`document.querySelector("#cursor").innerText`).(string); strings.Contains(text, "[object") || !strings.Contains(text, "homelab") {
		t.Fatalf("the pool at the cursor reads:\n%s", text)
	}
	browsertest.Screenshot(t, browser, shots, "timeline")
	// A click on node-2.lan's failure marker names the reason.
	where := eval(`(async () => {
		const [since, until] = document.body.dataset.window.split("/");
		const tl = await (await fetch("/api/v1/timeline?since=" + encodeURIComponent(since) + "&until=" + encodeURIComponent(until))).json();
		const row = tl.slots.indexOf("node-2.lan");
		let at = -1;
		for (let k = 0; k < tl.failures.length; k += 4) if (tl.failures[k] === row) at = tl.failures[k + 1];
		const c = document.getElementById("tl-canvas").getBoundingClientRect();
		const dur = Date.parse(tl.until) - Date.parse(tl.since);
		return [c.left + 150 + at / dur * (c.width - 150), c.top + 22 + row * 16 + 8, at];
	})()`).([]any)
	if where[2].(float64) < 0 {
		t.Fatal("no failure of node-2.lan on the timeline")
	}
	run("click the failure", chromedp.MouseClickXY(where[0].(float64), where[1].(float64)))
	browsertest.WaitJS(t, browser, 30*time.Second, "the failure's reason at the cursor", `document.querySelector("#cursor-failure") !== null && document.querySelector("#cursor-failure").innerText.includes("StartupJobFailed")`)

	// A write from the page: claim node-2.lan (its first wake failed) with its button (the request
	// carries the session's CSRF token).
	run("node-2.lan's page", chromedp.Navigate(base+"/ui/slots/node-2.lan"))
	browsertest.WaitJS(t, browser, 30*time.Second, "the claim button", `!document.getElementById("actions").hidden && !document.getElementById("do-claim").disabled`)
	run("claim node-2.lan", chromedp.Click(chromedp.ID("do-claim")))
	browsertest.WaitJS(t, browser, 30*time.Second, "the claim written", `document.getElementById("action-result").innerText.includes("ClaimCreated")`)
	browsertest.WaitJS(t, browser, 30*time.Second, "node-2.lan's live claim shown", `document.querySelector('#slot a[href^="/ui/claims/node-2.lan-"]') !== null`)

	// The events page streams the log, filtered.
	run("events", chromedp.Navigate(base+"/ui/events?slot=node-3.lan"))
	browsertest.WaitJS(t, browser, 30*time.Second, "node-3.lan's events", `document.querySelectorAll("#event-rows tr").length >= 3 && [...document.querySelectorAll("#event-rows tr")].every((r) => r.cells[4].innerText === "node-3.lan") && document.querySelector('#event-rows tr[data-type="ClaimReady"]') !== null`)
	browsertest.Screenshot(t, browser, shots, "events")

	// Phone width: the pool still reads (no horizontal scroll).
	run("phone", chromedp.EmulateViewport(390, 844), chromedp.Navigate(base+"/ui/"))
	browsertest.WaitJS(t, browser, 30*time.Second, "the pool at phone width", `document.querySelector('#groups[aria-busy="false"]') !== null && document.documentElement.scrollWidth <= window.innerWidth`)
	browsertest.Screenshot(t, browser, shots, "pool-phone")
	run("desktop", chromedp.EmulateViewport(1280, 900))

	// Logout: the cookie is gone, the pages and the API refuse again.
	run("log out", chromedp.Click(chromedp.ID("logout")), chromedp.WaitVisible(token))
	if cookies := getCookies(); len(cookies) != 0 {
		t.Fatalf("cookies after logout: %+v", cookies)
	}
	run("pool after logout", chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(token))
	if loc = location(); !strings.Contains(loc, "/ui/login") {
		t.Fatalf("after logout the pool is at %s", loc)
	}
	if status := eval(`fetch("/api/v1/groups").then((r) => r.status)`); status != float64(http.StatusUnauthorized) {
		t.Fatalf("the API from the page after logout: %d", status)
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
