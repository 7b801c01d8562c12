-- limber's LÖVE example: window and modules (see main.lua).
function love.conf(t)
  t.identity = "limber-crowd"
  t.version = "11.4"
  t.modules.audio = false
  t.modules.joystick = false
  t.modules.physics = false
  t.modules.sound = false
  t.modules.touch = false
  t.modules.video = false
  -- `--compare A B` only reads two PNG files: no window, no display needed
  for _, a in ipairs(arg or {}) do
    if a == "--compare" then
      t.window = nil
      t.modules.window = false
      t.modules.graphics = false
      return
    end
  end
  t.window.title = "limber: a crowd skinned on the GPU"
  t.window.width = 960
  t.window.height = 540
  t.window.depth = 24
  t.window.vsync = 0
  t.window.msaa = 0
end
