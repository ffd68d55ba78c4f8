-- Argo CD health check for serving.kserve.io/InferenceService, installed as
-- resource.customizations.health.serving.kserve.io_InferenceService in argocd-cm
-- (see kustomization.yaml beside this file). Argo CD runs it in gopher-lua (Lua 5.1)
-- with the live object in the global `obj`; it returns {status, message}.
--
-- Compatibility: on the 11 cases Argo CD publishes for its built-in check for this kind
-- (resource_customizations/serving.kserve.io/InferenceService/health.lua in
-- argoproj/argo-cd, as of the Stopped support of PR #25312) this script returns the
-- same status and the same message, in the same format; tests/manifests/argocd_health.rs holds it
-- to them. It departs from the built-in only where that check is wrong:
--   * an object being deleted is Progressing, "Pending deletion", naming the
--     finalizers that hold it (the wording of argo-cd PR #27596);
--   * a modelStatus without transitionStatus (the CRD enum allows "") does not raise a
--     Lua error (the built-in concatenates nil);
--   * a model that failed for good is Degraded even without conditions, and a Ready
--     condition that is False because of a terminal reason is Degraded instead of
--     Progressing for ever (see TERMINAL_REASONS below).

local health = {
  status = "Progressing",
  message = "Waiting for InferenceService to report status...",
}

-- Condition reasons after which KServe does not become Ready again without a change
-- of spec or of the cluster. All come from KServe's status code
-- (kserve/kserve pkg/apis/serving/v1beta1/inference_service_status.go), which copies
-- them from the workload it manages:
local TERMINAL_REASONS = {
  -- Serverless mode: PropagateStatus copies the Knative Service's conditions into
  -- PredictorReady / PredictorConfigurationReady; Knative Serving's Configuration
  -- reports "RevisionFailed" once its latest created revision failed
  -- (MarkLatestCreatedFailed: 'Revision "x" failed with message: ...'). Knative's
  -- "RevisionMissing" is deliberately absent: its Route uses it while waiting for a
  -- first revision too (MarkConfigurationNotReady, and False in Ready rollups seen
  -- while starting), and a revision that really failed carries RevisionFailed on the
  -- configuration condition as well.
  RevisionFailed = true,
  -- RawDeployment mode: PropagateRawStatus copies the Deployment's Progressing=False
  -- reason when it has a message; the Deployment controller sets
  -- "ProgressDeadlineExceeded" once spec.progressDeadlineSeconds has passed.
  ProgressDeadlineExceeded = true,
  -- RawDeployment mode: PropagateRawStatus gives ReplicaFailure=True precedence; its
  -- reason "FailedCreate" means the ReplicaSet cannot create pods at all (quota,
  -- admission denial, missing service account).
  FailedCreate = true,
}

-- modelStatus.transitionStatus values (same file, TransitionStatus enum): UpToDate,
-- InProgress, BlockedByFailedLoad (target model failed to load), InvalidSpec (the
-- predictor spec failed validation: NoSupportingRuntime, RuntimeNotRecognized,
-- RuntimeDisabled, InvalidPredictorSpec in lastFailureInfo.reason). As in the
-- built-in, anything but UpToDate and InProgress is Degraded.
-- ModelState "FailedToLoad" ("all copies of the model failed to load") is what KServe
-- writes to states.targetModelState for both failures.

local function text(value)
  if value == nil then
    return ""
  end
  return tostring(value)
end

-- " | reason | message" for the parts that are present, as the built-in writes them.
local function details(reason, message)
  local out = ""
  if reason ~= nil and reason ~= "" then
    out = out .. " | " .. text(reason)
  end
  if message ~= nil and message ~= "" then
    out = out .. " | " .. text(message)
  end
  return out
end

local meta = obj.metadata or {}
if meta.deletionTimestamp ~= nil then
  health.message = "Pending deletion"
  if meta.finalizers ~= nil and #meta.finalizers > 0 then
    health.message = health.message .. "; blocked by finalizers: " .. table.concat(meta.finalizers, ", ")
  end
  return health
end

local status = obj.status
if status == nil then
  return health
end

local progressing = false
local degraded = false
local msg = ""

local model = status.modelStatus
if model ~= nil then
  local transition = model.transitionStatus
  local states = model.states or {}
  if transition ~= nil and transition ~= "" then
    if transition ~= "UpToDate" then
      if transition == "InProgress" then
        progressing = true
      else
        degraded = true
      end
      msg = "0: transitionStatus | " .. text(transition)
    end
  elseif states.targetModelState == "FailedToLoad" or states.activeModelState == "FailedToLoad" then
    -- No transitionStatus to go by: the model state alone says the load failed.
    local failure = model.lastFailureInfo or {}
    degraded = true
    msg = "0: modelState | FailedToLoad" .. details(failure.reason, failure.message)
  end
end

local conditions = status.conditions
if conditions == nil then
  -- The built-in waits here whatever modelStatus says; a failed model will not
  -- report conditions later, so say so.
  if degraded then
    health.status = "Degraded"
    health.message = msg
  end
  return health
end

local unknown = 0
local false_count = 0
local ready_false = false
local terminal = false
for i, condition in ipairs(conditions) do
  local is_stopped = condition.type == "Stopped"
  if is_stopped and condition.status == "True" then
    health.status = "Suspended"
    health.message = "InferenceService is Stopped"
    return health
  end
  if condition.status == "False" then
    if not is_stopped then
      false_count = false_count + 1
      if TERMINAL_REASONS[condition.reason] then
        terminal = true
      end
      if condition.type == "Ready" then
        ready_false = true
      end
    end
  elseif condition.status ~= "True" then
    unknown = unknown + 1
  end
  if condition.status ~= "True" and not is_stopped then
    msg = msg .. " | " .. i .. ": " .. text(condition.type) .. " | " .. text(condition.status)
    msg = msg .. details(condition.reason, condition.message)
  end
end

if not progressing and not degraded and unknown == 0 and false_count == 0 then
  health.status = "Healthy"
  msg = "InferenceService is healthy."
elseif degraded or (ready_false and terminal) then
  health.status = "Degraded"
else
  health.status = "Progressing"
end
health.message = msg
return health
