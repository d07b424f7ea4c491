class_name LanderBotPlayer
extends Node
## Plays an exported lander bot (bots/RUN.json, docs/bot-format.md) in a Godot 4 game
## with GDScript alone: no C#, no ONNX runtime, so it works in Godot's standard build,
## where the Godot RL Agents plugin's ONNX inference needs the .NET build.
##
## Drop-in: add a Node with this script, set bot_path (or call load_bot), then each
## physics step give it an agent's observation dict (what the agent's get_obs()
## returns under "obs") and apply the returned dict as the agent's action
## (set_action). A bot with memory (trained with --memory, format version 2) keeps
## each agent's state here: pass the agent's index to act() and call
## start_episode(agent) when that agent's episode starts again (its reset()). Its
## numbers are those of lander's numpy runner; the Godot 3 copy of this player
## (examples/godot_lander/bot_player.gd) is checked against it to 1e-4.

@export_file("*.json") var bot_path: String = ""

var layers: Array = []
var obs_size: int = 0
var obs_keys: Array = []  ## [key, size] pairs: several observation keys, joined in order
var norm_mean: Array = []
var norm_scale: Array = []
var norm_clip: float = 0.0
var action_type: String = "continuous"
var action_size: int = 0
var action_low: Array = []
var action_high: Array = []
var nvec: Array = []
var action_keys: Array = []  ## [key, size, discrete] per action key, in the game's order
var run: String = ""
var timesteps: int = 0
var memory = null  ## a bot with memory: {"units", "weight_ih", "weight_hh", "bias_ih", "bias_hh"}
var states: Dictionary = {}  ## agent -> its state; absent: the agent's episode starts


func _ready() -> void:
	if bot_path != "":
		load_bot(bot_path)


func load_bot(path: String) -> bool:
	if not FileAccess.file_exists(path):
		push_error("LanderBotPlayer: no bot at %s" % path)
		return false
	var spec = JSON.parse_string(FileAccess.get_file_as_string(path))
	if typeof(spec) != TYPE_DICTIONARY:
		push_error("LanderBotPlayer: %s is not JSON" % path)
		return false
	var version := int(spec.get("version", 0))
	if spec.get("format", "") != "lander-bot" or not (version == 1 or version == 2):
		push_error("LanderBotPlayer: %s is not a lander bot of format version 1 or 2" % path)
		return false
	memory = spec.get("memory")
	states = {}
	if (version == 2) != (memory != null) or (memory != null and memory.get("kind", "") != "gru"):
		push_error("LanderBotPlayer: %s: a version 2 bot has a GRU memory, a version 1 bot none" % path)
		return false
	var observation: Dictionary = spec["observation"]
	obs_size = int(observation["size"])
	obs_keys = []
	for entry in observation.get("keys", []):
		if entry.has("encoder"):
			## A camera key's convolutions are too slow for GDScript at a game's frame rate:
			## such a bot plays in the engine through its ONNX file (the plugin's ONNX player).
			push_error("LanderBotPlayer: %s sees camera frames ('%s'): play it with its .onnx file, GDScript plays bots of vector observations" % [path, entry["key"]])
			return false
		obs_keys.append([entry["key"], int(entry["size"])])
	var normalization = observation.get("normalization")
	norm_mean = []
	norm_scale = []
	if normalization != null:
		norm_mean = normalization["mean"]
		norm_scale = normalization["scale"]
		norm_clip = float(normalization["clip"])
	var action: Dictionary = spec["action"]
	action_type = action["type"]
	action_size = int(action["size"])
	action_low = action.get("low", [])
	action_high = action.get("high", [])
	nvec = action.get("nvec", [])
	action_keys = []
	for entry in action.get("keys", []):
		action_keys.append([entry["key"], int(entry["size"]), entry["action_type"] == "discrete"])
	layers = spec["layers"]
	run = str(spec.get("run", ""))
	timesteps = int(spec.get("timesteps", 0))
	return true


func _activate(value: float, activation: String) -> float:
	if activation == "tanh":
		return tanh(value)
	if activation == "relu":
		return maxf(value, 0.0)
	return value


func _flat(obs) -> Array:
	## One vector: a dict of the bot's keys joined in its order, or the vector itself.
	if typeof(obs) != TYPE_DICTIONARY:
		return obs
	if obs_keys.is_empty():
		return obs.values()[0]
	var joined: Array = []
	for pair in obs_keys:
		joined.append_array(obs[pair[0]])
	return joined


func start_episode(agent: int = 0) -> void:
	## The agent's next observation starts an episode: its memory starts empty.
	states.erase(agent)


func _sigmoid(value: float) -> float:
	return 1.0 / (1.0 + exp(-value))


func _remember(values: Array, agent: int) -> Array:
	## torch's GRUCell: gates reset, update, new; the new gate's hidden part times reset.
	var units: int = int(memory["units"])
	var hidden: Array = states.get(agent, [])
	if hidden.is_empty():
		hidden.resize(units)
		hidden.fill(0.0)
	var given: Array = []
	var kept: Array = []
	for row in range(3 * units):
		var total: float = float(memory["bias_ih"][row])
		var weights: Array = memory["weight_ih"][row]
		for k in range(values.size()):
			total += float(weights[k]) * float(values[k])
		given.append(total)
		total = float(memory["bias_hh"][row])
		weights = memory["weight_hh"][row]
		for k in range(units):
			total += float(weights[k]) * float(hidden[k])
		kept.append(total)
	var after: Array = []
	for k in range(units):
		var reset: float = _sigmoid(given[k] + kept[k])
		var update: float = _sigmoid(given[units + k] + kept[units + k])
		var new: float = tanh(given[2 * units + k] + reset * kept[2 * units + k])
		after.append(new + update * (float(hidden[k]) - new))
	states[agent] = after
	return after


func network_output(obs, agent: int = 0) -> Array:
	## The network's raw output (Gaussian means or logits) for one observation; a bot
	## with memory reads and keeps the agent's state.
	var values: Array = _flat(obs).duplicate()
	if not norm_mean.is_empty():
		for k in range(values.size()):
			values[k] = clampf(
				(float(values[k]) - norm_mean[k]) / norm_scale[k], -norm_clip, norm_clip
			)
	if memory != null:
		values.append_array(_remember(values, agent))
	for layer in layers:
		var weights: Array = layer["weights"]
		var biases: Array = layer["biases"]
		var out: Array = []
		for unit in range(biases.size()):
			var row: Array = weights[unit]
			var total: float = float(biases[unit])
			for k in range(values.size()):
				total += float(row[k]) * float(values[k])
			out.append(_activate(total, layer["activation"]))
		values = out
	return values


func _argmax(values: Array, start: int, count: int) -> int:
	var best := 0
	for k in range(1, count):
		if values[start + k] > values[start + best]:
			best = k
	return best


func act_vector(obs, agent: int = 0):
	## The action as lander's runner reads it: continuous means clipped to the bounds
	## (an Array), the argmax of a discrete output (an int), or each segment's argmax.
	var output := network_output(obs, agent)
	if action_type == "discrete":
		return _argmax(output, 0, output.size())
	if action_type == "multi_discrete":
		var choices: Array = []
		var start := 0
		for count in nvec:
			choices.append(_argmax(output, start, int(count)))
			start += int(count)
		return choices
	var clipped: Array = []
	for k in range(output.size()):
		var low: float = -1.0 if action_low.is_empty() else float(action_low[k])
		var high: float = 1.0 if action_high.is_empty() else float(action_high[k])
		clipped.append(clampf(output[k], low, high))
	return clipped


func act(obs, default_key: String = "move", agent: int = 0) -> Dictionary:
	## The action dict the game expects, by the bot's action keys (a mixed policy's
	## discrete key gets the argmax of its slots), else under default_key.
	var vector = act_vector(obs, agent)
	if action_keys.is_empty():
		return {default_key: vector}
	var result := {}
	var index := 0
	for entry in action_keys:
		var key: String = entry[0]
		var size: int = entry[1]
		if action_type == "discrete":
			result[key] = vector
		elif action_type == "multi_discrete":
			result[key] = vector[index]
			index += 1
		elif entry[2]:
			result[key] = _argmax(vector, index, size)
			index += size
		else:
			result[key] = vector.slice(index, index + size)
			index += size
	return result
