// A lander bot (bots/RUN.json, docs/bot-format.md) evaluated in plain JavaScript: the
// numpy runner of game_bridge/bot_runner.py, line for line. A bot with memory (format
// version 2) keeps each agent's state here: act(obs, agent), and startEpisode(agent)
// when that agent's episode starts again.
"use strict";

class BotError extends Error {}

class Bot {
  constructor(spec) {
    if (!spec || spec.format !== "lander-bot") throw new BotError("not a lander bot");
    if (spec.version !== 1 && spec.version !== 2) throw new BotError(`bot format version ${spec.version} is not supported`);
    if ((spec.version === 2) !== Boolean(spec.memory)) {
      throw new BotError("a version 2 bot has a memory and a version 1 bot none");
    }
    const observation = spec.observation, action = spec.action;
    if (!observation || !action || !Array.isArray(spec.layers) || spec.layers.length === 0) {
      throw new BotError("bot file lacks observation, action or layers");
    }
    const camera = (observation.keys || []).find((entry) => entry.encoder);
    if (camera) {
      // The page draws the arena, not the camera's frames the bot was trained on.
      throw new BotError(`this bot sees camera frames (${camera.key}): the page plays bots that read coordinates; try lander play BOT`);
    }
    this.spec = spec;
    this.obsSize = Number(observation.size);
    this.actionType = action.type;
    this.actionSize = Number(action.size);
    this.nvec = action.nvec || [];
    this.low = action.low || new Array(this.actionSize).fill(-1.0);
    this.high = action.high || new Array(this.actionSize).fill(1.0);
    this.normalization = observation.normalization || null;
    this.layers = spec.layers;
    this.memory = spec.memory ? Bot.checkedMemory(spec.memory, this.obsSize) : null;
    this.states = new Map();   // agent -> its state; absent: its episode starts
    let width = this.obsSize + (this.memory ? this.memory.units : 0);
    this.layers.forEach((layer, index) => {
      const rows = layer.weights;
      if (!Array.isArray(rows) || rows.length !== layer.biases.length
          || rows.some((row) => !Array.isArray(row) || row.length !== width)) {
        throw new BotError(`layer ${index}: weights do not take an input of width ${width}`);
      }
      if (!["tanh", "relu", "linear"].includes(layer.activation)) {
        throw new BotError(`layer ${index}: unknown activation ${layer.activation}`);
      }
      width = rows.length;
    });
    const expected = this.actionType === "multi_discrete"
      ? this.nvec.reduce((a, b) => a + b, 0) : this.actionSize;
    if (width !== expected) throw new BotError(`the network outputs ${width} values, the action needs ${expected}`);
    this.run = spec.run || "";
    this.timesteps = Number(spec.timesteps || 0);
  }

  static checkedMemory(memory, width) {
    const units = Array.isArray(memory.weight_hh) && Array.isArray(memory.weight_hh[0])
      ? memory.weight_hh[0].length : 0;
    if (memory.kind !== "gru" || units < 1 || units > 4096) {
      throw new BotError("the bot's memory must be a GRU of 1 to 4,096 units");
    }
    const shapes = { weight_ih: [3 * units, width], weight_hh: [3 * units, units], bias_ih: [3 * units], bias_hh: [3 * units] };
    for (const [name, [rows, columns]] of Object.entries(shapes)) {
      const values = memory[name];
      if (!Array.isArray(values) || values.length !== rows
          || (columns !== undefined && values.some((row) => !Array.isArray(row) || row.length !== columns))) {
        throw new BotError(`memory ${name} does not fit a GRU of ${units} units over ${width} inputs`);
      }
    }
    return { units, weightIh: memory.weight_ih, weightHh: memory.weight_hh, biasIh: memory.bias_ih, biasHh: memory.bias_hh };
  }

  startEpisode(agent = 0) {
    this.states.delete(agent);
  }

  remember(x, agent) {
    // torch's GRUCell: gates reset, update, new; the new gate's hidden part times reset.
    const m = this.memory, units = m.units;
    const hidden = this.states.get(agent) || new Array(units).fill(0.0);
    const given = new Array(3 * units), kept = new Array(3 * units);
    for (let r = 0; r < 3 * units; r++) {
      let a = m.biasIh[r], b = m.biasHh[r];
      const wi = m.weightIh[r], wh = m.weightHh[r];
      for (let k = 0; k < x.length; k++) a += wi[k] * x[k];
      for (let k = 0; k < units; k++) b += wh[k] * hidden[k];
      given[r] = a; kept[r] = b;
    }
    const sigmoid = (v) => 1.0 / (1.0 + Math.exp(-v));
    const after = new Array(units);
    for (let k = 0; k < units; k++) {
      const reset = sigmoid(given[k] + kept[k]);
      const update = sigmoid(given[units + k] + kept[units + k]);
      const fresh = Math.tanh(given[2 * units + k] + reset * kept[2 * units + k]);
      after[k] = fresh + update * (hidden[k] - fresh);
    }
    this.states.set(agent, after);
    return after;
  }

  output(obs, agent = 0) {
    let x = obs.slice();
    const norm = this.normalization;
    if (norm) {
      x = x.map((v, k) => Math.min(Math.max((v - norm.mean[k]) / norm.scale[k], -norm.clip), norm.clip));
    }
    if (this.memory) x = x.concat(this.remember(x, agent));
    for (const layer of this.layers) {
      const out = new Array(layer.biases.length);
      for (let u = 0; u < out.length; u++) {
        const row = layer.weights[u];
        let total = layer.biases[u];
        for (let k = 0; k < x.length; k++) total += row[k] * x[k];
        out[u] = layer.activation === "tanh" ? Math.tanh(total)
          : layer.activation === "relu" ? Math.max(total, 0.0) : total;
      }
      x = out;
    }
    return x;
  }

  static argmax(values, start, count) {
    let best = 0;
    for (let k = 1; k < count; k++) if (values[start + k] > values[start + best]) best = k;
    return best;
  }

  act(obs, agent = 0) {
    const out = this.output(obs, agent);
    if (this.actionType === "discrete") return Bot.argmax(out, 0, out.length);
    if (this.actionType === "multi_discrete") {
      let start = 0;
      return this.nvec.map((count) => { const c = Bot.argmax(out, start, count); start += count; return c; });
    }
    return out.map((v, k) => Math.min(Math.max(v, this.low[k]), this.high[k]));
  }
}

if (typeof module !== "undefined") module.exports = { Bot, BotError };
