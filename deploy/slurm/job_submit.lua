--[[
job_submit.lua (sample): attach the LLM capacity planner's hints to jobs at submission.

Slurm's job_submit/lua plugin runs this inside slurmctld for every submission (tested with
Slurm 22.05.8, Debian's slurm-wlm, which links Lua 5.1). It makes no network calls: it reads a
local file that the planner writes atomically (adapters.slurm.hints.write_hints_file), one line
per key:

    KEY<TAB>TIME_LIMIT_MIN<TAB>BODY

KEY is `scenario:USER:/abs/path.yaml` (USER's jobs submitted with
`--comment=planner:scenario=PATH`; a relative PATH is joined to the job's working directory) or
`job:USER/JOB_NAME`, tried in that order. Both are per user: one user's hints never reach
another user's jobs, even when they name the same scenario file. BODY is what follows `planner:hint=` in a comment (`rt:5400;eta:...;p90:6000;...`).

For a job with a hint it
  * appends ` planner:hint=BODY` to the job's comment (the user's text is kept as it is;
    `planner:hint=` tokens the user typed are dropped, the namespace is the planner's; fields
    are dropped from the end when the comment would pass Slurm's 1024-byte limit), and
  * only when PLANNER_HINTS_SET_TIME_LIMIT=1 and the user gave no --time: sets the time limit
    to TIME_LIMIT_MIN, capped at the partition's MaxTime.
It never rejects a job: a missing or unreadable file, or a malformed line, only means no hint.

Install: copy to the directory of slurm.conf, set `JobSubmitPlugins=lua`, and
`scontrol reconfigure`. Settings come from slurmctld's environment (e.g. a systemd drop-in):
  PLANNER_HINTS_FILE            default /var/lib/planner/slurm-hints.tsv
  PLANNER_HINTS_SET_TIME_LIMIT  1 = set the time limit of jobs submitted without one (default 0)
  PLANNER_HINTS_RELOAD_S        re-read the file at most this often, seconds (default 30)
]]

local HINTS_FILE = os.getenv("PLANNER_HINTS_FILE") or "/var/lib/planner/slurm-hints.tsv"
local SET_TIME_LIMIT = os.getenv("PLANNER_HINTS_SET_TIME_LIMIT") == "1"
local RELOAD_S = tonumber(os.getenv("PLANNER_HINTS_RELOAD_S") or "") or 30
local COMMENT_MAX_BYTES = 1024
local PREFIX = "planner:hint="

local cache = { loaded_at = nil, hints = {} }

-- key -> { limit = minutes or nil, body = "rt:...;..." }; re-read at most every RELOAD_S
local function load_hints()
   local now = os.time()
   if cache.loaded_at ~= nil and now - cache.loaded_at < RELOAD_S then
      return cache.hints
   end
   local hints = {}
   local fh = io.open(HINTS_FILE, "r")
   if fh ~= nil then
      for line in fh:lines() do
         if line:sub(1, 1) ~= "#" then
            local key, limit, body = line:match("^([^\t]+)\t([^\t]*)\t([^\t]+)$")
            if key ~= nil then
               hints[key] = { limit = tonumber(limit), body = body }
            end
         end
      end
      fh:close()
   end
   cache.loaded_at = now
   cache.hints = hints
   return hints
end

-- the comment without planner:hint= tokens (each taken with the space written before it)
local function strip_hint(s)
   local init = 1
   while true do
      local i, j = s:find(PREFIX .. "%S*", init, false)
      if i == nil then
         return s
      end
      if i == 1 or s:sub(i - 1, i - 1):match("%s") then
         if i > 1 and s:sub(i - 1, i - 1) == " " then
            i = i - 1
         elseif i == 1 and s:sub(j + 1, j + 1) == " " then
            j = j + 1
         end
         s = s:sub(1, i - 1) .. s:sub(j + 1)
         init = math.max(i, 1)
      else
         init = j + 1
      end
   end
end

-- the body shortened field by field (from the end) to at most max_bytes; "" if nothing fits
local function fit_body(body, max_bytes)
   while #body > max_bytes do
      local cut = body:match("^(.*);[^;]*$")
      if cut == nil then
         return ""
      end
      body = cut
   end
   return body
end

local function find_hint(job_desc, hints)
   local comment = job_desc.comment or ""
   local path = comment:match("planner:scenario=(%S+)")
   if job_desc.user_name == nil then
      return nil, nil  -- every key is per user: no user, no hint
   end
   if path ~= nil then
      if path:sub(1, 1) ~= "/" and job_desc.work_dir ~= nil then
         path = job_desc.work_dir .. "/" .. path
      end
      local key = "scenario:" .. job_desc.user_name .. ":" .. path
      local hint = hints[key]
      if hint ~= nil then
         return hint, key
      end
   end
   if job_desc.user_name ~= nil and job_desc.name ~= nil then
      local key = "job:" .. job_desc.user_name .. "/" .. job_desc.name
      if hints[key] ~= nil then
         return hints[key], key
      end
   end
   return nil, nil
end

-- the MaxTime (minutes) of the partition the job asked for (else the default one), or nil
local function partition_max_time(job_desc, part_list)
   if part_list == nil then
      return nil
   end
   for name, part in pairs(part_list) do
      local wanted = job_desc.partition
      if (wanted ~= nil and wanted == name) or (wanted == nil and part.flag_default == 1) then
         local max_time = part.max_time
         if max_time ~= nil and max_time ~= slurm.INFINITE and max_time ~= slurm.NO_VAL then
            return max_time
         end
         return nil
      end
   end
   return nil
end

function slurm_job_submit(job_desc, part_list, submit_uid)
   local ok, err = pcall(function()
      local hint, key = find_hint(job_desc, load_hints())
      if hint == nil then
         return
      end
      local text = strip_hint(job_desc.comment or "")
      local room = COMMENT_MAX_BYTES - #text - (#text > 0 and 1 or 0) - #PREFIX
      local body = fit_body(hint.body, room)
      if body ~= "" then
         local token = PREFIX .. body
         if #text > 0 then
            job_desc.comment = text .. " " .. token
         else
            job_desc.comment = token
         end
      end
      local unset = job_desc.time_limit == nil or job_desc.time_limit == slurm.NO_VAL
      if SET_TIME_LIMIT and unset and hint.limit ~= nil and hint.limit > 0 then
         local limit = hint.limit
         local max_time = partition_max_time(job_desc, part_list)
         if max_time ~= nil and limit > max_time then
            limit = max_time
         end
         job_desc.time_limit = limit
      end
      slurm.log_info("planner hints: %s matched for uid %s", key, tostring(submit_uid))
   end)
   if not ok then
      slurm.log_error("planner hints: ignored after an error: %s", tostring(err))
   end
   return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
   return slurm.SUCCESS
end

slurm.log_info("planner hints: job_submit.lua loaded (hints file %s)", HINTS_FILE)
return slurm.SUCCESS
