// The duel in the browser: the bot flies red, the person flies blue with the arrow keys,
// both after one target, with the rules of games/duel/world.py (a round of ROUND_S game
// seconds; a crash loses; else the longer hold of the target wins, within DRAW_MARGIN_S a
// draw). The lander physics and the bot runner are the lander page's (physics.js, bot.js).
// The bot is fetched from ./bot every second and swapped when a new one is published.
// The state is exposed as window.duel for tests.
"use strict";

(function () {
  const ROUND_S = 12.0, DRAW_MARGIN_S = 0.25;
  const params = new URLSearchParams(location.search);
  const speed = Number(params.get("speed") || 1);
  const canvas = document.getElementById("arena");
  const context = canvas.getContext("2d");
  const scale = canvas.width / LANDER.WIDTH;
  let shared = null;                                   // the target both landers chase
  const uniform = (low, high) => low + (high - low) * Math.random();
  const world = new LanderWorld(2, {
    newTarget: (i) => {
      if (i === 0 || shared === null) {
        shared = { x: uniform(3.0, LANDER.WIDTH - 3.0), y: uniform(3.0, LANDER.HEIGHT - 3.0) };
      }
      return shared;
    },
  });
  world.episodeTicks = Math.round(ROUND_S * LANDER.TICKS_PER_SECOND);
  const keys = new Set();
  let bot = null, botKey = "";
  const held = [0, 0];
  const state = window.duel = {
    botVersion: 0, botRun: null, error: "", steps: 0, rounds: 0,
    tally: { bot: 0, person: 0, draw: 0 }, landers: [], held, keys: [],
  };

  function show(id, text) { document.getElementById(id).textContent = text; }
  function setError(message) { state.error = message; show("error", message); }

  async function poll() {
    try {
      const response = await fetch("bot", { cache: "no-cache" });
      if (!response.ok) throw new Error(`the server has no bot yet (${response.status})`);
      const spec = JSON.parse(await response.text());
      const key = `${spec.run}|${spec.timesteps}|${spec.exported_at}`;
      if (key === botKey) return;
      bot = new Bot(spec); botKey = key;
      state.botVersion += 1; state.botRun = bot.run;
      show("run", bot.run || "(unnamed)"); show("steps", bot.timesteps.toLocaleString("en"));
      setError("");
    } catch (error) {
      setError(`${error.message}${bot ? " (still flying the previous bot)" : ""}`);
    }
  }

  // The duel's observation: a lander's own 7 values, then its rival's offset and velocity.
  function observe(i) {
    const me = world.agents[i], rival = world.agents[1 - i];
    const clip = (v) => Math.min(Math.max(v, -1.0), 1.0);
    return [...world.observe(i), clip((rival.px - me.px) / LANDER.POS_SCALE),
      clip((rival.py - me.py) / LANDER.POS_SCALE), clip(rival.vx / LANDER.VEL_SCALE),
      clip(rival.vy / LANDER.VEL_SCALE)];
  }

  function personAction() {
    const main = keys.has("ArrowUp") ? 1.0 : -1.0;
    const lateral = (keys.has("ArrowRight") ? 1.0 : 0.0) - (keys.has("ArrowLeft") ? 1.0 : 0.0);
    return [main, lateral];
  }

  function endRound(winner) {
    state.rounds += 1;
    state.tally[winner] += 1;
    show("botWins", state.tally.bot); show("yourWins", state.tally.person); show("draws", state.tally.draw);
    held[0] = held[1] = 0;
    shared = null;
    world.resetAgent(0); world.resetAgent(1);
  }

  function stepWorld() {
    if (!bot) return;
    const actions = [bot.act(observe(0)), personAction()];
    const results = [world.step(0, actions[0]), world.step(1, actions[1])];
    const stepS = world.actionRepeat / LANDER.TICKS_PER_SECOND;
    results.forEach((r, i) => { if (r.success) held[i] += stepS; });
    state.steps += 1;
    state.landers = world.agents.map((a) => ({ x: a.px, y: a.py }));
    state.keys = [...keys];
    show("redHeld", held[0].toFixed(1)); show("blueHeld", held[1].toFixed(1));
    const [red, blue] = results;
    if (red.terminated || blue.terminated) {
      endRound(red.terminated && blue.terminated ? "draw" : red.terminated ? "person" : "bot");
    } else if (red.truncated || blue.truncated) {
      const gap = held[0] - held[1];
      endRound(Math.abs(gap) < DRAW_MARGIN_S / 2 ? "draw" : gap > 0 ? "bot" : "person");
    }
  }

  function draw() {
    context.fillStyle = "#161b22";
    context.fillRect(0, 0, canvas.width, canvas.height);
    const px = (x) => x * scale, py = (y) => canvas.height - y * scale;
    const target = world.agents[0];
    context.strokeStyle = "#7ee787"; context.lineWidth = 2;
    context.beginPath(); context.arc(px(target.tx), py(target.ty), LANDER.SUCCESS_RADIUS * scale, 0, 2 * Math.PI); context.stroke();
    world.agents.forEach((a, i) => {
      context.fillStyle = i === 0 ? "#ff7b72" : "#79c0ff";
      context.beginPath(); context.arc(px(a.px), py(a.py), LANDER.HULL * scale, 0, 2 * Math.PI); context.fill();
    });
  }

  document.addEventListener("keydown", (event) => {
    if (event.key.startsWith("Arrow")) { keys.add(event.key); event.preventDefault(); }
  });
  document.addEventListener("keyup", (event) => keys.delete(event.key));
  const stepSeconds = world.actionRepeat / LANDER.TICKS_PER_SECOND / speed;
  runAtGameSpeed(stepSeconds, stepWorld, draw);
  poll();
  setInterval(poll, 1000);
})();
