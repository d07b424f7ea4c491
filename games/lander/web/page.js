// The page: landers in the browser's physics, flown by the bot, following the cursor.
// The bot is fetched from ./bot and asked for again every second (the browser keeps it and
// the server answers 304 while it is the same): a new version (its
// run, steps or export time) replaces the flying one without a reload; a file that is
// not a valid bot shows an error and the previous bot keeps flying. The state is
// exposed as window.lander for tests.
// A person flies lander 1 with the arrow keys after pressing K (Up: main engine, Down:
// none, Left/Right: lateral; no key hovers); its target then moves by itself, as in the
// game the bots train in, and every step is recorded. "save demos" downloads the
// episodes as a lander demo file (docs/demos.md), and, when the server was started with
// --record-demo FILE, also saves them there.
"use strict";

(function () {
  const params = new URLSearchParams(location.search);
  const speed = Number(params.get("speed") || 1);        // game seconds per wall second
  const agents = Number(params.get("agents") || 3);
  const canvas = document.getElementById("arena");
  const context = canvas.getContext("2d");
  const scale = canvas.width / LANDER.WIDTH;               // pixels per metre
  let cursor = { x: LANDER.WIDTH / 2, y: LANDER.HEIGHT / 2 };
  let flying = false;                                     // a person flies lander 1
  const randomTarget = () => ({ x: 3.0 + (LANDER.WIDTH - 6.0) * Math.random(),
                                y: 3.0 + (LANDER.HEIGHT - 6.0) * Math.random() });
  const world = new LanderWorld(agents, {
    newTarget: (i) => (flying && i === 0 ? randomTarget() : { x: cursor.x, y: cursor.y }),
  });
  const keys = new Set();
  const demo = { episodes: [], current: { observations: [], actions: [], rewards: [] } };
  let bot = null, botKey = "", source = "server";
  const returns = new Array(agents).fill(0), finished = [];
  const state = window.lander = {
    botVersion: 0, botRun: null, botSteps: null, error: "", steps: 0, landers: [], target: cursor,
    score: null, flying: false, demoEpisodes: 0, demoSaved: "", botMemory: 0, episodesStarted: 0,
  };

  function show(id, text) { document.getElementById(id).textContent = text; }

  function setError(message) { state.error = message; show("error", message); }

  function useBot(spec, key) {
    const fresh = new Bot(spec);                      // throws BotError on a bad file
    bot = fresh; botKey = key;
    state.botVersion += 1; state.botRun = fresh.run; state.botSteps = fresh.timesteps;
    state.botMemory = fresh.memory ? fresh.memory.units : 0;
    show("run", fresh.run || "(unnamed)");
    show("steps", fresh.timesteps.toLocaleString("en"));
    setError("");
  }

  async function poll() {
    if (source !== "server") return;
    try {
      const response = await fetch("bot", { cache: "no-cache" });
      if (!response.ok) throw new Error(`the server has no bot yet (${response.status})`);
      const text = await response.text();
      let spec;
      try { spec = JSON.parse(text); } catch (error) { throw new Error(`the bot file is not JSON: ${error.message}`); }
      const key = `${spec.run}|${spec.timesteps}|${spec.exported_at}`;
      if (key !== botKey) useBot(spec, key);
    } catch (error) {
      setError(`${error.message}${bot ? " (still flying the previous bot)" : ""}`);
    }
  }

  function loadFile(file) {
    file.text().then((text) => {
      try {
        const spec = JSON.parse(text);
        useBot(spec, `file:${file.name}:${spec.timesteps}`);
        source = "file";
      } catch (error) {
        setError(`${file.name}: ${error.message}${bot ? " (still flying the previous bot)" : ""}`);
      }
    });
  }

  function metres(event) {
    const box = canvas.getBoundingClientRect();
    const x = (event.clientX - box.left) / box.width * LANDER.WIDTH;
    const y = LANDER.HEIGHT - (event.clientY - box.top) / box.height * LANDER.HEIGHT;
    return { x: Math.min(Math.max(x, 1.0), LANDER.WIDTH - 1.0), y: Math.min(Math.max(y, 1.0), LANDER.HEIGHT - 1.0) };
  }

  canvas.addEventListener("pointermove", (event) => { cursor = metres(event); });
  canvas.addEventListener("pointerdown", (event) => { cursor = metres(event); });
  document.getElementById("file").addEventListener("change", (event) => {
    if (event.target.files.length) loadFile(event.target.files[0]);
  });
  document.addEventListener("dragover", (event) => event.preventDefault());
  document.addEventListener("drop", (event) => {
    event.preventDefault();
    if (event.dataTransfer.files.length) loadFile(event.dataTransfer.files[0]);
  });

  function keyboardAction() {
    const main = (keys.has("ArrowUp") ? 1 : 0) - (keys.has("ArrowDown") ? 1 : 0);
    const lateral = (keys.has("ArrowRight") ? 1 : 0) - (keys.has("ArrowLeft") ? 1 : 0);
    return [main, lateral];
  }

  function flyByHand(result, obs, action) {
    const current = demo.current;
    current.observations.push(obs); current.actions.push(action); current.rewards.push(result.reward);
    if (result.terminated || result.truncated) {
      demo.episodes.push(current);
      demo.current = { observations: [], actions: [], rewards: [] };
      state.demoEpisodes = demo.episodes.length;
      show("demo", `${demo.episodes.length} episode(s) recorded`);
    }
  }

  function demoDocument() {
    return {
      format: "lander-demos", version: 1, game: "lander", game_args: {}, recorded_by: "keyboard",
      recorded_at: new Date().toISOString(), observation: { size: 7 },
      action: { type: "continuous", size: 2, low: [-1, -1], high: [1, 1] },
      episodes: demo.episodes,
    };
  }

  async function saveDemos() {
    const text = JSON.stringify(demoDocument());
    const link = document.createElement("a");
    link.href = URL.createObjectURL(new Blob([text], { type: "application/json" }));
    link.download = "lander-demos.json";
    link.click();
    try {
      const response = await fetch("demo", { method: "POST", body: text });
      state.demoSaved = response.ok ? await response.text() : "";
      if (state.demoSaved) show("demo", `${demo.episodes.length} episode(s) saved to ${state.demoSaved}`);
    } catch (error) { state.demoSaved = ""; }
  }

  function toggleFlying() {
    flying = !flying; state.flying = flying;
    world.resetAgent(0); returns[0] = 0;
    demo.current = { observations: [], actions: [], rewards: [] };
    show("demo", flying ? "flying lander 1 with the arrow keys: recording" : `${demo.episodes.length} episode(s) recorded`);
  }

  document.addEventListener("keydown", (event) => {
    if (event.key.startsWith("Arrow")) { keys.add(event.key); event.preventDefault(); }
    if (event.key === "k" || event.key === "K") toggleFlying();
  });
  document.addEventListener("keyup", (event) => keys.delete(event.key));
  document.getElementById("save").addEventListener("click", saveDemos);

  function stepWorld() {
    for (let i = 0; i < agents; i++) {
      const agent = world.agents[i];
      const byHand = flying && i === 0;
      if (!byHand) { agent.tx = cursor.x; agent.ty = cursor.y; }   // the target is the cursor
      if (!bot && !byHand) continue;
      const obs = world.observe(i);
      const action = byHand ? keyboardAction() : bot.act(obs, i);   // a bot with memory keeps i's
      const result = world.step(i, action);
      if (byHand) flyByHand(result, obs, action);
      returns[i] += result.reward;
      if (result.terminated || result.truncated) {
        if (!byHand) finished.push(returns[i]);            // the score is the bot's
        if (finished.length > 20) finished.shift();
        returns[i] = 0;
        world.resetAgent(i);
        if (bot) bot.startEpisode(i);
        state.episodesStarted += 1;
      }
    }
    state.steps += 1;
    state.target = { x: cursor.x, y: cursor.y };
    state.landers = world.agents.map((a) => ({ x: a.px, y: a.py }));
    if (finished.length) {
      state.score = finished.reduce((a, b) => a + b, 0) / finished.length;
      show("score", `${state.score.toFixed(1)} (mean of the last ${finished.length} episodes)`);
    }
  }

  function draw() {
    context.fillStyle = "#161b22";
    context.fillRect(0, 0, canvas.width, canvas.height);
    const px = (x) => x * scale, py = (y) => canvas.height - y * scale;
    context.strokeStyle = "#7ee787"; context.lineWidth = 2;
    context.beginPath(); context.arc(px(cursor.x), py(cursor.y), LANDER.SUCCESS_RADIUS * scale, 0, 2 * Math.PI); context.stroke();
    world.agents.forEach((a, i) => {
      context.fillStyle = ["#79c0ff", "#d2a8ff", "#ffa657", "#f778ba"][i % 4];
      context.beginPath(); context.arc(px(a.px), py(a.py), LANDER.HULL * scale, 0, 2 * Math.PI); context.fill();
    });
  }

  // Game time runs at 60 ticks per second x speed; a step is actionRepeat ticks.
  const stepSeconds = world.actionRepeat / LANDER.TICKS_PER_SECOND / speed;
  runAtGameSpeed(stepSeconds, stepWorld, draw);
  poll();
  setInterval(poll, 1000);
})();
