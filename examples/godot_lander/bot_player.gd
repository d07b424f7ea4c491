extends Node
# Plays an exported lander bot (bots/RUN.json, docs/bot-format.md) with GDScript
# alone: no C#, no ONNX runtime, so it works in Godot's standard build. Godot 3
# syntax (this example's engine); examples/godot4/bot_player.gd is the same player
# for Godot 4 games.
#
# Use: add a Node with this script, call load_bot("res://bots/run05.json") once,
# then act(obs, "thrust", agent) for each agent's observation (the dict the game
# sends, or its vector) and give the game what it returns (a dict by action key).
# A bot with memory (trained with --memory, format version 2) keeps each agent's
# state here between calls: call start_episode(agent) when that agent's episode
# starts again. The numbers are those of lander's numpy runner within 1e-4
# (tests/test_godot.py).

var layers = []  # each {"weights": rows of the input width, "biases", "activation"}
var obs_size = 0
var obs_keys = []  # several observation keys: [key, size] pairs, joined in this order
var norm_mean = null
var norm_scale = null
var norm_clip = 0.0
var action_type = "continuous"
var action_size = 0
var action_low = []
var action_high = []
var nvec = []
var action_keys = []  # [key, size, discrete] per action key, when the bot lists them
var run = ""
var timesteps = 0
var memory = null  # a bot with memory: {"units", "weight_ih", "weight_hh", "bias_ih", "bias_hh"}
var states = {}  # agent -> its state (memory's units numbers); absent: an episode's start


func load_bot(path: String) -> bool:
	var file = File.new()
	if file.open(path, File.READ) != OK:
		push_error("bot_player: cannot read %s" % path)
		return false
	var parsed = JSON.parse(file.get_as_text())
	file.close()
	if parsed.error != OK or typeof(parsed.result) != TYPE_DICTIONARY:
		push_error("bot_player: %s is not JSON" % path)
		return false
	var spec = parsed.result
	var version = int(spec.get("version", 0))
	if spec.get("format", "") != "lander-bot" or not (version == 1 or version == 2):
		push_error("bot_player: %s is not a lander bot of format version 1 or 2" % path)
		return false
	memory = spec.get("memory")
	states = {}
	if (version == 2) != (memory != null) or (memory != null and memory.get("kind", "") != "gru"):
		push_error("bot_player: %s: a version 2 bot has a GRU memory, a version 1 bot none" % path)
		return false
	var observation = spec["observation"]
	obs_size = int(observation["size"])
	obs_keys = []
	for entry in observation.get("keys", []):
		if entry.has("encoder"):
			## A camera key's convolutions are too slow for GDScript at a game's frame rate:
			## such a bot plays in the engine through its ONNX file (the plugin's ONNX player).
			push_error("bot_player: %s sees camera frames ('%s'): play it with its .onnx file, GDScript plays bots of vector observations" % [path, entry["key"]])
			return false
		obs_keys.append([entry["key"], int(entry["size"])])
	var normalization = observation.get("normalization")
	if normalization != null:
		norm_mean = normalization["mean"]
		norm_scale = normalization["scale"]
		norm_clip = float(normalization["clip"])
	var action = spec["action"]
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
		return max(value, 0.0)
	return value


func _flat(obs) -> Array:
	# One vector: a dict of the bot's keys joined in its order, or the vector itself.
	if typeof(obs) != TYPE_DICTIONARY:
		return obs
	if obs_keys.empty():
		return obs.values()[0]
	var joined = []
	for pair in obs_keys:
		joined += obs[pair[0]]
	return joined


func start_episode(agent: int = 0) -> void:
	# The agent's next observation starts an episode: its memory starts empty.
	states.erase(agent)


func _sigmoid(value: float) -> float:
	return 1.0 / (1.0 + exp(-value))


func _remember(values: Array, agent: int) -> Array:
	# torch's GRUCell: gates reset, update, new; the new gate's hidden part times reset.
	var units = int(memory["units"])
	var hidden = states.get(agent)
	if hidden == null:
		hidden = []
		for k in range(units):
			hidden.append(0.0)
	var gates = []
	for row in range(3 * units):
		var given = float(memory["bias_ih"][row])
		var weights = memory["weight_ih"][row]
		for k in range(values.size()):
			given += float(weights[k]) * float(values[k])
		var kept = float(memory["bias_hh"][row])
		weights = memory["weight_hh"][row]
		for k in range(units):
			kept += float(weights[k]) * float(hidden[k])
		gates.append([given, kept])
	var after = []
	for k in range(units):
		var reset = _sigmoid(gates[k][0] + gates[k][1])
		var update = _sigmoid(gates[units + k][0] + gates[units + k][1])
		var new = tanh(gates[2 * units + k][0] + reset * gates[2 * units + k][1])
		after.append(new + update * (float(hidden[k]) - new))
	states[agent] = after
	return after


func network_output(obs, agent: int = 0) -> Array:
	# The network's raw output (Gaussian means or logits) for one observation; a bot
	# with memory reads and keeps the agent's state.
	var values = _flat(obs).duplicate()
	if norm_mean != null:
		for k in range(values.size()):
			values[k] = clamp((float(values[k]) - norm_mean[k]) / norm_scale[k], -norm_clip, norm_clip)
	if memory != null:
		values += _remember(values, agent)
	for layer in layers:
		var weights = layer["weights"]
		var biases = layer["biases"]
		var out = []
		for unit in range(biases.size()):
			var row = weights[unit]
			var total = float(biases[unit])
			for k in range(values.size()):
				total += float(row[k]) * float(values[k])
			out.append(_activate(total, layer["activation"]))
		values = out
	return values


func _argmax(values: Array, start: int, count: int) -> int:
	var best = 0
	for k in range(1, count):
		if values[start + k] > values[start + best]:
			best = k
	return best


func act_vector(obs, agent: int = 0):
	# The action as lander's runner reads it: continuous means clipped to the bounds
	# (an Array), the argmax of a discrete output (an int), or each segment's argmax.
	var output = network_output(obs, agent)
	if action_type == "discrete":
		return _argmax(output, 0, output.size())
	if action_type == "multi_discrete":
		var choices = []
		var start = 0
		for count in nvec:
			choices.append(_argmax(output, start, int(count)))
			start += int(count)
		return choices
	var clipped = []
	for k in range(output.size()):
		var low = -1.0 if action_low.empty() else float(action_low[k])
		var high = 1.0 if action_high.empty() else float(action_high[k])
		clipped.append(clamp(output[k], low, high))
	return clipped


func act(obs, default_key: String = "thrust", agent: int = 0) -> Dictionary:
	# The action dict the game expects: by the bot's action keys when it lists them
	# (a mixed policy's discrete key gets the argmax of its slots), else under default_key.
	var vector = act_vector(obs, agent)
	if action_keys.empty():
		return {default_key: vector}
	var result = {}
	var index = 0
	for entry in action_keys:
		var key = entry[0]
		var size = entry[1]
		if action_type == "discrete":
			result[key] = vector
		elif action_type == "multi_discrete":
			result[key] = vector[index]
			index += 1
		elif entry[2]:
			result[key] = _argmax(vector, index, size)
			index += size
		else:
			result[key] = vector.slice(index, index + size - 1)
			index += size
	return result
