extends Node
# The sync node: speaks the Godot RL Agents wire protocol (plugin sync.gd,
# version 0.7) for the game in main.gd, as the plugin does:
# - connects to the trainer on 127.0.0.1:--port;
# - physics runs at 60 x --speedup ticks per second (Engine.iterations_per_second)
#   and Engine.time_scale = --speedup, so game time per tick stays 1/60 s;
# - an action is applied for --action_repeat physics ticks, then the step reply
#   (obs, reward, done, info) is sent and the next message awaited;
# - the game resets its own finished agents and reports is_success,
#   TimeLimit.truncated and terminal_observation (plugin PR #65) in info.

const MAJOR_VERSION = "0"

var stream: StreamPeerTCP = null
var game = null
var action_repeat = 8
var n_agents = 2
var frames_left = 0
var connected = false
# Bot mode (--bot=PATH): the game flies an exported bot itself, no trainer; each step's
# observation and action go to --bot_trace=PATH (JSON lines) for --bot_steps steps.
var bot = null
var bot_path = ""
var bot_text_hash = 0
var bot_trace = null
var bot_steps_left = 0
var bot_step = 0
var bot_starts = []  # agents whose next step starts an episode (told to a bot with memory)
const BOT_CHECK_STEPS = 30  # how often bot mode looks for a newer bot in its file


func _args() -> Dictionary:
	var values = {}
	for argument in OS.get_cmdline_args():
		if argument.begins_with("--") and argument.find("=") > 0:
			var pair = argument.substr(2).split("=", true, 1)
			values[pair[0]] = pair[1]
	return values


func _ready() -> void:
	var args = _args()
	var speedup = float(args.get("speedup", "8"))
	action_repeat = int(args.get("action_repeat", "6"))
	n_agents = int(args.get("agents", "2"))
	Engine.iterations_per_second = int(60 * speedup)
	Engine.time_scale = speedup
	# The headless server sleeps between frames (low-processor mode), which would
	# cap physics at 8 ticks per 6.9 ms frame whatever the speedup.
	OS.low_processor_usage_mode = false
	game = get_parent()
	# Deferred: the parent cannot take new children while its own children are readied.
	game.call_deferred("setup", n_agents, int(args.get("env_seed", "0")),
		args.get("action_type", "continuous") == "discrete", int(args.get("difficulty", "1")),
		args.get("mode", "") == "duel")
	if args.has("bot"):
		_start_bot(args)
		return
	stream = StreamPeerTCP.new()
	var port = int(args.get("port", "11008"))
	if stream.connect_to_host("127.0.0.1", port) != OK:
		push_error("cannot connect to the trainer on port %d" % port)
		get_tree().quit(1)
		return
	var waited = 0
	while stream.get_status() == StreamPeerTCP.STATUS_CONNECTING and waited < 5000:
		OS.delay_msec(5)
		waited += 5
	if stream.get_status() != StreamPeerTCP.STATUS_CONNECTED:
		push_error("the trainer did not accept the connection on port %d" % port)
		get_tree().quit(1)
		return
	stream.set_no_delay(true)
	connected = true


func _read_text(path: String) -> String:
	var file = File.new()
	if file.open(path, File.READ) != OK:
		return ""
	var text = file.get_as_text()
	file.close()
	return text


func _load_newer_bot() -> bool:
	# The bot in bot_path when it changed (a run publishing its newest bot there): swapped
	# in while the landers fly; a file that is not a valid bot leaves the current one flying.
	var text = _read_text(bot_path)
	if text == "" or text.hash() == bot_text_hash:
		return false
	var fresh = load("res://bot_player.gd").new()
	if not fresh.load_bot(bot_path):
		bot_text_hash = text.hash()  # said once; the current bot keeps flying
		return false
	if bot != null:
		bot.queue_free()
	bot = fresh
	add_child(bot)
	bot_text_hash = text.hash()
	print("flying bot %s (%d steps of training)" % [bot.run, bot.timesteps])
	return true


func _start_bot(args: Dictionary) -> void:
	bot_path = args["bot"]
	if not _load_newer_bot():
		get_tree().quit(1)
		return
	bot_steps_left = int(args.get("bot_steps", "600"))
	if args.has("bot_trace"):
		bot_trace = File.new()
		if bot_trace.open(args["bot_trace"], File.WRITE) != OK:
			push_error("cannot write %s" % args["bot_trace"])
			get_tree().quit(1)
			return


func _bot_step() -> void:
	# One step of the bot: act on every agent's observation, as the trainer would.
	if bot_step % BOT_CHECK_STEPS == 0 and bot_step > 0:
		_load_newer_bot()
	if bot_starts.size() != n_agents:
		bot_starts = []
		for i in range(n_agents):
			bot_starts.append(true)
	for i in range(n_agents):
		var obs = game.observe(i)
		var action = bot.act({"obs": obs}, "thrust", i)
		if bot_trace != null:
			bot_trace.store_line('{"step": %d, "agent": %d, "start": %s, "obs": %s, "action": %s}' % [
				bot_step, i, "true" if bot_starts[i] else "false", _numbers(obs),
				_numbers(action["thrust"])])
		bot_starts[i] = false
		game.apply_action(i, action["thrust"])
	bot_step += 1
	bot_steps_left -= 1


func _numbers(values) -> String:
	# A JSON list at full precision (to_json keeps 6 digits): a discrete action is one int.
	if typeof(values) != TYPE_ARRAY:
		return str(values)
	var parts = []
	for value in values:
		parts.append("%.12f" % value)
	return "[" + PoolStringArray(parts).join(", ") + "]"


func _bot_physics() -> void:
	if frames_left > 0:
		frames_left -= 1
		if frames_left > 0:
			return
		var steps = _finished_steps()
		for i in range(n_agents):
			if steps[i]["done"]:
				game.reset_agent(i)
				bot.start_episode(i)
				bot_starts[i] = true
	if bot_steps_left <= 0:
		if bot_trace != null:
			bot_trace.close()
		get_tree().quit()
		set_physics_process(false)
		return
	_bot_step()
	frames_left = action_repeat


func _finished_steps() -> Array:
	# Every agent's last step: one by one, or in duel mode a match's two landers together.
	if game.duel:
		return game.finish_duel_steps(action_repeat)
	var steps = []
	for i in range(n_agents):
		steps.append(game.finish_step(i, action_repeat))
	return steps


func _send(message: Dictionary) -> void:
	stream.put_string(to_json(message))


func _receive():
	# Blocks until a whole message is in (the engine waits for the trainer, as the plugin does).
	if stream.get_status() != StreamPeerTCP.STATUS_CONNECTED:
		return null
	var text = stream.get_string()
	if text == "" and stream.get_status() != StreamPeerTCP.STATUS_CONNECTED:
		return null
	var parsed = JSON.parse(text)
	if parsed.error != OK or typeof(parsed.result) != TYPE_DICTIONARY:
		return null
	return parsed.result


func _env_info() -> Dictionary:
	var action = {"size": 2, "action_type": "continuous"}
	if game.discrete:
		action = {"size": 4, "action_type": "discrete"}
	var observation_space = []
	var action_space = []
	var names = []
	for i in range(n_agents):
		observation_space.append({"obs": {"size": [11 if game.duel else 7], "space": "box"}})
		action_space.append({"thrust": action})
		names.append(("red" if i % 2 == 0 else "blue") if game.duel else "shared_policy")
	return {"type": "env_info", "observation_space": observation_space, "action_space": action_space,
		"n_agents": n_agents, "agent_policy_names": names}


func _all_obs() -> Array:
	var obs = []
	for i in range(n_agents):
		obs.append({"obs": game.observe(i)})
	return obs


func _handle_messages() -> void:
	# Answer messages until an action arrives (then physics runs) or the trainer leaves.
	while true:
		var message = _receive()
		if message == null:
			get_tree().quit()
			set_physics_process(false)
			return
		var kind = message.get("type", "")
		if kind == "handshake":
			if str(message.get("major_version", "")) != MAJOR_VERSION:
				push_error("unsupported protocol version")
			continue
		if kind == "env_info":
			_send(_env_info())
		elif kind == "reset":
			for i in range(n_agents):
				game.reset_agent(i)
			var infos = []
			for _i in range(n_agents):
				infos.append({})
			_send({"type": "reset", "obs": _all_obs(), "info": infos})
		elif kind == "call":
			var returns = []
			for _i in range(n_agents):
				returns.append(null)
			_send({"type": "call", "returns": returns})
		elif kind == "close":
			get_tree().quit()
			set_physics_process(false)
			return
		elif kind == "action":
			var actions = message.get("action", [])
			for i in range(n_agents):
				game.apply_action(i, actions[i]["thrust"])
			frames_left = action_repeat
			return


func _send_step() -> void:
	var rewards = []
	var dones = []
	var infos = []
	var steps = _finished_steps()
	for i in range(n_agents):  # every terminal observation before any lander is reset
		var outcome = steps[i]
		rewards.append(outcome["reward"])
		dones.append(outcome["done"])
		if outcome["done"]:
			var info = {"is_success": outcome["success"], "TimeLimit.truncated": outcome["truncated"],
				"terminal_observation": {"obs": game.observe(i)}}
			if outcome.has("outcome"):
				info["outcome"] = outcome["outcome"]
			infos.append(info)
		else:
			infos.append({})
	for i in range(n_agents):
		if dones[i]:
			game.reset_agent(i)
	_send({"type": "step", "obs": _all_obs(), "reward": rewards, "done": dones, "info": infos})


func _physics_process(_delta: float) -> void:
	if game.landers.size() < n_agents:
		return  # the game sets itself up on the first idle frame
	if bot != null:
		_bot_physics()
		return
	if not connected:
		return
	if frames_left > 0:
		frames_left -= 1
		if frames_left > 0:
			return
		_send_step()
	_handle_messages()
