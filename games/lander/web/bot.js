// A lander bot (bots/RUN.json, docs/bot-format.md) evaluated in plain JavaScript: the
// numpy runner of game_bridge/bot_runner.py, line for line.
"use strict";

class BotError extends Error {}

class Bot {
  constructor(spec) {
    if (!spec || spec.format !== "lander-bot") throw new BotError("not a lander bot");
    if (spec.version !== 1) throw new BotError(`bot format version ${spec.version} is not supported`);
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
    let width = this.obsSize;
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

  output(obs) {
    let x = obs.slice();
    const norm = this.normalization;
    if (norm) {
      x = x.map((v, k) => Math.min(Math.max((v - norm.mean[k]) / norm.scale[k], -norm.clip), norm.clip));
    }
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

  act(obs) {
    const out = this.output(obs);
    if (this.actionType === "discrete") return Bot.argmax(out, 0, out.length);
    if (this.actionType === "multi_discrete") {
      let start = 0;
      return this.nvec.map((count) => { const c = Bot.argmax(out, start, count); start += count; return c; });
    }
    return out.map((v, k) => Math.min(Math.max(v, this.low[k]), this.high[k]));
  }
}

if (typeof module !== "undefined") module.exports = { Bot, BotError };
