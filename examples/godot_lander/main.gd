extends Node2D
# The lander game in Godot: K landers (RigidBody2D, Godot's own 2D physics)
# follow targets that jump every few seconds, as lander's bundled game does.
# Observation and action layout match the bundled game:
#   obs [dx, dy, vx, vy, x, y, t] in [-1, 1]; actions [main, lateral] in [-1, 1]
#   (or 4 discrete actions: coast, main engine, left, right).
# The sync node (sync.gd) speaks the Godot RL Agents protocol for it.
# Duel mode (--mode=duel), the rules of lander's bundled duel game (games/duel/world.py):
# landers 2m (red) and 2m+1 (blue) chase one target in rounds of 12 s; a crash loses, else
# the longer hold of the target wins. Observations add the rival's offset and velocity;
# rewards are zero-sum, and the round's outcome is said in each lander's info.

const PIXELS_PER_METRE = 40.0
const WIDTH = 20.0
const HEIGHT = 15.0
const GRAVITY = 5.0  # project default gravity: 200 px/s^2
const MAIN_ACCEL = 10.0
const LATERAL_ACCEL = 3.0
const DRAG = 0.2
const HULL = 0.3
const TARGET_PERIODS = [360, 240, 180]  # ticks, by difficulty
const EPISODE_TICKS = 1200
const SUCCESS_RADIUS = 1.0
const CLOSENESS_RANGE = 8.0
const CRASH_PENALTY = 10.0
const POS_SCALE = 15.0
const VEL_SCALE = 10.0
const ROUND_TICKS = 720
const DRAW_MARGIN_S = 0.25
const OUTCOME_REWARD = 10.0
const SHAPING = 0.5
const OUTCOMES = {1: "win", 0: "draw", -1: "loss"}

var rng = RandomNumberGenerator.new()
var landers = []  # RigidBody2D
var targets = []  # Vector2 in metres, y up
var timers = []
var ticks = []
var crashed = []
var discrete = false
var target_period = 240
var duel = false
var episode_ticks = EPISODE_TICKS
var held = []


func setup(n_agents: int, seed_value: int, discrete_actions: bool, difficulty: int,
		duel_mode: bool = false) -> void:
	rng.seed = seed_value
	discrete = discrete_actions
	duel = duel_mode
	episode_ticks = ROUND_TICKS if duel else EPISODE_TICKS
	target_period = TARGET_PERIODS[clamp(difficulty, 0, 2)]
	for _i in range(n_agents):
		var body = RigidBody2D.new()
		body.mode = RigidBody2D.MODE_CHARACTER
		body.linear_damp = DRAG
		body.can_sleep = false
		body.collision_layer = 0
		body.collision_mask = 0
		var shape = CollisionShape2D.new()
		var circle = CircleShape2D.new()
		circle.radius = HULL * PIXELS_PER_METRE
		shape.shape = circle
		body.add_child(shape)
		add_child(body)
		landers.append(body)
		targets.append(Vector2.ZERO)
		timers.append(0)
		ticks.append(0)
		crashed.append(false)
		held.append(0.0)
	for i in range(n_agents):
		reset_agent(i)


func _new_target() -> Vector2:
	return Vector2(rng.randf_range(3.0, WIDTH - 3.0), rng.randf_range(3.0, HEIGHT - 3.0))


func _teleport(i: int, position_m: Vector2, velocity_m: Vector2) -> void:
	var rid = landers[i].get_rid()
	var pixels = Vector2(position_m.x, HEIGHT - position_m.y) * PIXELS_PER_METRE
	Physics2DServer.body_set_state(rid, Physics2DServer.BODY_STATE_TRANSFORM, Transform2D(0.0, pixels))
	var speed = Vector2(velocity_m.x, -velocity_m.y) * PIXELS_PER_METRE
	Physics2DServer.body_set_state(rid, Physics2DServer.BODY_STATE_LINEAR_VELOCITY, speed)
	landers[i].position = pixels
	landers[i].linear_velocity = speed


func reset_agent(i: int) -> void:
	var start = Vector2(rng.randf_range(4.0, WIDTH - 4.0), rng.randf_range(5.0, HEIGHT - 4.0))
	var velocity = Vector2(rng.randf_range(-1.0, 1.0), rng.randf_range(-1.0, 1.0))
	_teleport(i, start, velocity)
	landers[i].applied_force = Vector2.ZERO
	targets[i] = _new_target()
	if duel and i % 2 == 1:
		targets[i] = targets[i - 1]  # blue chases red's target (red is reset first)
	timers[i] = target_period
	ticks[i] = 0
	crashed[i] = false
	held[i] = 0.0


func position_m(i: int) -> Vector2:
	var p = landers[i].position / PIXELS_PER_METRE
	return Vector2(p.x, HEIGHT - p.y)


func velocity_m(i: int) -> Vector2:
	var v = landers[i].linear_velocity / PIXELS_PER_METRE
	return Vector2(v.x, -v.y)


func apply_action(i: int, action) -> void:
	var main = 0.0
	var lateral = 0.0
	if discrete:
		var choice = int(action)  # Godot's JSON gives 1.0 for 1
		main = MAIN_ACCEL if choice == 1 else 0.0
		lateral = -LATERAL_ACCEL if choice == 2 else (LATERAL_ACCEL if choice == 3 else 0.0)
	else:
		main = (clamp(float(action[0]), -1.0, 1.0) + 1.0) * 0.5 * MAIN_ACCEL
		lateral = clamp(float(action[1]), -1.0, 1.0) * LATERAL_ACCEL
	var body = landers[i]
	body.applied_force = Vector2(lateral, -main) * PIXELS_PER_METRE * body.mass


func observe(i: int) -> Array:
	var p = position_m(i)
	var v = velocity_m(i)
	var offset = (targets[i] - p) / POS_SCALE
	var obs = [
		offset.x, offset.y, v.x / VEL_SCALE, v.y / VEL_SCALE,
		(p.x - WIDTH / 2.0) / (WIDTH / 2.0), (p.y - HEIGHT / 2.0) / (HEIGHT / 2.0),
		float(timers[i]) / float(target_period) * 2.0 - 1.0,
	]
	if duel:
		var rival = i ^ 1
		var gap = (position_m(rival) - p) / POS_SCALE
		var rival_v = velocity_m(rival) / VEL_SCALE
		for value in [gap.x, gap.y, rival_v.x, rival_v.y]:
			obs.append(value)
	for k in range(obs.size()):
		obs[k] = clamp(obs[k], -1.0, 1.0)
	return obs


func _physics_process(_delta: float) -> void:
	# One physics tick of game rules (Godot integrates the bodies after this).
	for i in range(landers.size()):
		if crashed[i]:
			continue
		ticks[i] += 1
		timers[i] -= 1
		if timers[i] <= 0 and ticks[i] < episode_ticks:
			targets[i] = targets[i - 1] if duel and i % 2 == 1 else _new_target()
			timers[i] = target_period
		var p = position_m(i)
		if p.x < HULL or p.x > WIDTH - HULL or p.y < HULL or p.y > HEIGHT - HULL:
			crashed[i] = true
			landers[i].applied_force = Vector2.ZERO


func finish_step(i: int, step_ticks: int) -> Dictionary:
	# The outcome of agent i's last step: reward, done and the protocol info.
	var distance = position_m(i).distance_to(targets[i])
	var inside = distance < SUCCESS_RADIUS
	var closeness = clamp(1.0 - distance / CLOSENESS_RANGE, 0.0, 1.0)
	var scale = float(step_ticks) / 60.0 * 10.0
	var reward = (closeness + (1.0 if inside else 0.0)) * scale
	if crashed[i]:
		reward -= CRASH_PENALTY
	var truncated = not crashed[i] and ticks[i] >= episode_ticks
	return {"reward": reward, "done": crashed[i] or truncated, "truncated": truncated,
		"success": inside and not crashed[i]}


func finish_duel_steps(step_ticks: int) -> Array:
	# The outcome of every lander's last step in duel mode: both of a match end together.
	var steps = []
	for i in range(landers.size()):
		steps.append(finish_step(i, step_ticks))
	for red in range(0, landers.size(), 2):
		var blue = red + 1
		for i in [red, blue]:
			if steps[i]["success"]:
				held[i] += float(step_ticks) / 60.0
		var ended = crashed[red] or crashed[blue] or steps[red]["truncated"] or steps[blue]["truncated"]
		var outcome = 0
		if crashed[red] or crashed[blue]:
			outcome = int(crashed[blue]) - int(crashed[red])
		else:
			var margins = round((held[red] - held[blue]) / DRAW_MARGIN_S)
			outcome = int(sign(margins))
		var shaped = SHAPING * (steps[red]["reward"] - steps[blue]["reward"])
		var crash = crashed[red] or crashed[blue]
		for pair in [[red, outcome], [blue, -outcome]]:
			var i = pair[0]
			var mine = pair[1] if ended else 0
			var reward = (shaped if i == red else -shaped) + OUTCOME_REWARD * mine
			steps[i] = {"reward": reward, "done": ended, "truncated": ended and not crash,
				"success": mine > 0, "outcome": OUTCOMES[mine]}
	return steps
