// The bundled lander game's physics in the browser: the same world as
// games/lander/physics.py (tick by tick: the Python steps the same
// recurrence in closed form), so a bot trained there flies here. Difficulty 0 and 1
// (no gusts). The target comes from the page (the cursor) or from a replay.
"use strict";

const LANDER = Object.freeze({
  TICKS_PER_SECOND: 60, WIDTH: 20.0, HEIGHT: 15.0, GRAVITY: 5.0, MAIN_ACCEL: 10.0,
  LATERAL_ACCEL: 3.0, DRAG: 0.2, HULL: 0.3, EPISODE_S: 20.0, SUCCESS_RADIUS: 1.0,
  CLOSENESS_RANGE: 8.0, CRASH_PENALTY: 10.0, POS_SCALE: 15.0, VEL_SCALE: 10.0,
  TARGET_PERIODS_S: [6.0, 4.0],
});

class LanderWorld {
  // nAgents landers; newTarget() gives a target {x, y} in metres (y up) when one moves;
  // random() gives uniform numbers in [0, 1) for starts.
  constructor(nAgents, options = {}) {
    this.n = nAgents;
    this.actionRepeat = options.actionRepeat || 6;
    this.discrete = Boolean(options.discrete);
    this.random = options.random || Math.random;
    this.newTarget = options.newTarget || (() => ({
      x: this.uniform(3.0, LANDER.WIDTH - 3.0), y: this.uniform(3.0, LANDER.HEIGHT - 3.0) }));
    const difficulty = options.difficulty === undefined ? 1 : options.difficulty;
    this.targetPeriod = Math.round(LANDER.TARGET_PERIODS_S[difficulty] * LANDER.TICKS_PER_SECOND);
    this.episodeTicks = Math.round(LANDER.EPISODE_S * LANDER.TICKS_PER_SECOND);
    this.dt = 1.0 / LANDER.TICKS_PER_SECOND;
    this.agents = [];
    for (let i = 0; i < nAgents; i++) {
      this.agents.push({ px: 0, py: 0, vx: 0, vy: 0, tx: 0, ty: 0, timer: 0, ticks: 0 });
      this.resetAgent(i);
    }
  }

  uniform(low, high) { return low + (high - low) * this.random(); }

  resetAgent(i) {
    const a = this.agents[i];
    a.px = this.uniform(4.0, LANDER.WIDTH - 4.0);
    a.py = this.uniform(5.0, LANDER.HEIGHT - 4.0);
    a.vx = this.uniform(-1.0, 1.0);
    a.vy = this.uniform(-1.0, 1.0);
    const target = this.newTarget(i);
    a.tx = target.x; a.ty = target.y;
    a.timer = this.targetPeriod;
    a.ticks = 0;
  }

  // Observation in [-1, 1]: [dx, dy, vx, vy, x, y, t], as physics.py's observe().
  observe(i) {
    const a = this.agents[i];
    const obs = [
      (a.tx - a.px) / LANDER.POS_SCALE, (a.ty - a.py) / LANDER.POS_SCALE,
      a.vx / LANDER.VEL_SCALE, a.vy / LANDER.VEL_SCALE,
      2.0 * a.px / LANDER.WIDTH - 1.0, 2.0 * a.py / LANDER.HEIGHT - 1.0,
      2.0 * a.timer / this.targetPeriod - 1.0,
    ];
    return obs.map((v) => Math.min(Math.max(v, -1.0), 1.0));
  }

  acceleration(action) {
    if (this.discrete) {
      const choice = Math.trunc(Number(action));
      const g = LANDER.GRAVITY;
      if (choice === 1) return [0.0, LANDER.MAIN_ACCEL - g];
      if (choice === 2) return [-LANDER.LATERAL_ACCEL, -g];
      if (choice === 3) return [LANDER.LATERAL_ACCEL, -g];
      return [0.0, -g];
    }
    const main = Math.min(Math.max(action[0], -1.0), 1.0);
    const lateral = Math.min(Math.max(action[1], -1.0), 1.0);
    const half = 0.5 * LANDER.MAIN_ACCEL;
    return [lateral * LANDER.LATERAL_ACCEL, main * half + (half - LANDER.GRAVITY)];
  }

  // One step of agent i: the action for actionRepeat ticks of semi-implicit Euler with
  // drag; a lander that leaves the arena stops at the tick it crashed.
  step(i, action) {
    const a = this.agents[i];
    const [ax, ay] = this.acceleration(action);
    const ratio = 1.0 - LANDER.DRAG * this.dt;
    const cx = LANDER.WIDTH / 2, cy = LANDER.HEIGHT / 2;
    const rx = cx - LANDER.HULL, ry = cy - LANDER.HULL;
    let lived = this.actionRepeat;
    let crashed = false;
    for (let t = 0; t < this.actionRepeat; t++) {
      a.vx = ratio * a.vx + ax * this.dt;
      a.vy = ratio * a.vy + ay * this.dt;
      a.px += a.vx * this.dt;
      a.py += a.vy * this.dt;
      if (Math.abs((a.px - cx) / rx) > 1.0 || Math.abs((a.py - cy) / ry) > 1.0) {
        crashed = true;
        lived = t + 1;
        break;
      }
    }
    a.ticks += lived;
    a.timer -= lived;
    let moveTick = a.ticks + a.timer;
    while (a.timer <= 0 && moveTick < this.episodeTicks) {
      const target = this.newTarget(i);
      a.tx = target.x; a.ty = target.y;
      a.timer += this.targetPeriod;
      moveTick += this.targetPeriod;
    }
    const distance = Math.hypot(a.tx - a.px, a.ty - a.py);
    const inside = distance < LANDER.SUCCESS_RADIUS;
    const closeness = Math.max(1.0 - distance / LANDER.CLOSENESS_RANGE, 0.0);
    const scale = this.actionRepeat / LANDER.TICKS_PER_SECOND * 10.0;
    const reward = (closeness + (inside ? 1.0 : 0.0)) * scale - (crashed ? LANDER.CRASH_PENALTY : 0.0);
    return {
      obs: this.observe(i), reward, terminated: crashed,
      truncated: !crashed && a.ticks >= this.episodeTicks, success: inside && !crashed,
    };
  }
}

// Calls step() once per stepSeconds of wall time (catching up at most a second after a
// stall) and draw() every animation frame: a page's game loop at game speed.
function runAtGameSpeed(stepSeconds, step, draw) {
  let last = performance.now(), owed = 0;
  function frame(now) {
    owed = Math.min(owed + (now - last) / 1000, 1.0);
    last = now;
    while (owed >= stepSeconds) { step(); owed -= stepSeconds; }
    draw();
    requestAnimationFrame(frame);
  }
  requestAnimationFrame(frame);
}

if (typeof module !== "undefined") module.exports = { LANDER, LanderWorld };
