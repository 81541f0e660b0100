"""Replays the SageMaker Python SDK's AWS Batch quota-management notebook
against a qshare server, through boto3, with the calls and arguments that
the SDK itself sends (aws/sagemaker-python-sdk at a24812666:
sagemaker-train/src/sagemaker/train/aws_batch/, model_trainer.py,
sagemaker-core's iam_role_resolver.py, resources.py TrainingJob.get/wait, and
v3-examples/training-examples/aws_batch/sm-training-queues_quota-management.ipynb
with its utils/aws_batch_resource_management.py).

The SDK itself cannot be installed where qshare's tests run, so this drives
the same calls with boto3. Run it against a server with the simulated
executor, whose jobs run for --sim-duration when the payload (built by
ModelTrainer) names no run time:

    qshare serve --executor simulated --sim-duration 5s &
    AWS_ENDPOINT_URL=http://127.0.0.1:8750 python3 replay_notebook.py

With REPLAY_EXECUTOR=process, the server runs the jobs for real
(qshare serve --executor process, as root, so that each job has /opt/ml):
the SDK's sm_train.sh then runs SourceCode(command=REPLAY_COMMAND), the
notebook's "echo 'Hello World'" unless the variable says otherwise (the
test adds "; sleep 4", so that a job runs long enough to be preempted), and
the replay checks "Hello World" in the job's CloudWatch Logs stream and
opens the model.tar.gz that DescribeTrainingJob names.

The drivers channel is built and uploaded per submit, as
ModelTrainer._create_training_job_args does, to
s3://BUCKET/BASE/NAME/input/sm_drivers/. With SAGEMAKER_SDK_SOURCE naming a
checkout of aws/sagemaker-python-sdk, they are the SDK's own files: its
container_drivers/ and install_requirements.py, and an sm_train.sh that its
templates.py (loaded from that checkout) formats as _prepare_train_script
does. Without it, a stand-in sm_train.sh of the same steps runs the command
(it cats the config files and writes sm_training.env itself, in place of the
SDK's environment.py).

It prints one line per step ("step NAME ok ...") and, last, the seconds from
the first call (Session(): STS) to the last job SUCCEEDED. Any step that
does not go as the notebook says raises, and the script exits non-zero.
Polls are every 0.1 s, where the notebook's helpers sleep 5 s: the calls
are the SDK's, the waits are not.
"""

import datetime
import importlib.util
import io
import json
import os
import re
import sys
import tarfile
import time
import urllib.parse

import boto3
import botocore
from botocore.config import Config

REGION = os.environ.get("AWS_DEFAULT_REGION", "us-east-1")
CFG = Config(retries={"max_attempts": 1})


def client(name):
    # AWS_ENDPOINT_URL (botocore's endpoint for every service) names qshare.
    return boto3.client(name, region_name=REGION, config=CFG,
                        aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID", "qshare"),
                        aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "qshare"))


def step(name, detail=""):
    print("step", name, "ok", detail, "(at %.2f s)" % (time.time() - t0), flush=True)


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def code_of(f):
    try:
        f()
        return "ok"
    except botocore.exceptions.ClientError as e:
        return e.response["Error"]["Code"]


def poll(what, f, timeout=60):
    end = time.time() + timeout
    while True:
        v = f()
        if v:
            return v
        if time.time() > end:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.1)


# The clients first: botocore loading its service models (SageMaker's is
# several MB of JSON) is the Python side's cost, not the server's, and is
# measured apart; the figure runs from the first call (Session(): STS).
t_clients = time.time()
sts, iam, batch, sm, logs, s3 = (client(n) for n in ("sts", "iam", "batch", "sagemaker", "logs", "s3"))
t0 = time.time()
print("clients made in %.2f s" % (t0 - t_clients), flush=True)

# --- ModelTrainer(...): TrainDefaults.get_role -> resolve_and_validate_role.
ident = sts.get_caller_identity()
caller = ident["Arn"]
expect(":assumed-role/" in caller, "the caller is an assumed role: " + caller)
role_name = caller.split("/")[1]
role_arn = iam.get_role(RoleName=role_name)["Role"]["Arn"]
simulate = code_of(lambda: iam.simulate_principal_policy(PolicySourceArn=role_arn, ActionNames=["sagemaker:CreateTrainingJob"]))
expect(simulate in ("AccessDenied", "AccessDeniedException"), "SimulatePrincipalPolicy is AccessDenied (the SDK warns and goes on): " + simulate)
trust = iam.get_role(RoleName=role_name)["Role"]["AssumeRolePolicyDocument"]
if isinstance(trust, str):  # botocore decodes it; the SDK copes with both
    trust = json.loads(urllib.parse.unquote(trust))
expect(any(s.get("Principal", {}).get("Service") == "sagemaker.amazonaws.com" for s in trust["Statement"]), "the role trusts SageMaker")
step("resolve-role", role_arn)

# --- create_quota_management_resources (the notebook's utils).
INSTANCE_TYPE, JQ, SE, SP = "ml.g5.xlarge", "my-sm-training-qm-jq", "my-sm-training-qm-se", "my-qm-scheduling-policy"
sp = batch.create_scheduling_policy(name=SP, quotaSharePolicy={"idleResourceAssignmentStrategy": "FIFO"})
se = batch.create_service_environment(serviceEnvironmentName=SE, serviceEnvironmentType="SAGEMAKER_TRAINING", state="ENABLED",
                                      capacityLimits=[{"maxCapacity": 3, "capacityUnit": INSTANCE_TYPE}])
poll("the service environment", lambda: (lambda e: e["status"] == "VALID" and e["state"] == "ENABLED")(
    batch.describe_service_environments(serviceEnvironments=[SE])["serviceEnvironments"][0]))
batch.create_job_queue(jobQueueName=JQ, jobQueueType="SAGEMAKER_TRAINING", state="ENABLED", priority=1,
                       serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": se["serviceEnvironmentName"]}], schedulingPolicyArn=sp["arn"])
poll("the job queue", lambda: (lambda q: q["status"] == "VALID" and q["state"] == "ENABLED")(batch.describe_job_queues(jobQueues=[JQ])["jobQueues"][0]))
for name, strategy, in_share, borrow in (("QS1", "LEND_AND_BORROW", True, 200), ("QS2", "LEND", False, None), ("QS3", "RESERVE", False, None)):
    qs = batch.create_quota_share(quotaShareName=name, jobQueue=JQ, capacityLimits=[{"capacityUnit": INSTANCE_TYPE, "maxCapacity": 1}],
                                  resourceSharingConfiguration={"strategy": strategy, **({"borrowLimit": borrow} if borrow else {})},
                                  preemptionConfiguration={"inSharePreemption": "ENABLED" if in_share else "DISABLED"}, state="ENABLED")
    poll("quota share " + name, lambda: (lambda d: d["status"] == "VALID" and d["state"] == "ENABLED")(batch.describe_quota_share(quotaShareArn=qs["quotaShareArn"])))
step("quota-resources")

# --- ModelTrainer._create_training_job_args(boto3=True), per submit.
BASE = "hello-world-simple-job"
BUCKET = "sagemaker-%s-%s" % (REGION, ident["Account"])  # the config file's DefaultS3Bucket (qshare sdk-config)
SM_DRIVERS = "/opt/ml/input/data/sm_drivers"

# Session.default_bucket() with DefaultS3Bucket set: the bucket's
# creation_date (ListBuckets), head_bucket, and create_bucket when missing;
# then create_input_data_channel uploads the drivers (upload_file).
if not any(b["Name"] == BUCKET for b in s3.list_buckets().get("Buckets", [])):
    if code_of(lambda: s3.head_bucket(Bucket=BUCKET)) != "ok":
        s3.create_bucket(Bucket=BUCKET)
expect(code_of(lambda: s3.head_bucket(Bucket=BUCKET)) == "ok", "the default bucket exists")
step("default-bucket", BUCKET)

EXECUTOR = os.environ.get("REPLAY_EXECUTOR", "simulated")
COMMAND = os.environ.get("REPLAY_COMMAND", "echo 'Hello World'")  # the notebook's SourceCode(command=...)
SDK = os.environ.get("SAGEMAKER_SDK_SOURCE", "")
STAND_IN = """#!/bin/bash
set -e
echo "Starting training script (qshare's replay: a stand-in for the SDK's sm_train.sh)"
echo "/opt/ml/input/config/resourceconfig.json:"
cat /opt/ml/input/config/resourceconfig.json
echo
echo "/opt/ml/input/config/inputdataconfig.json:"
cat /opt/ml/input/config/inputdataconfig.json
echo
echo "export SM_MODEL_DIR='/opt/ml/model'" > /opt/ml/input/sm_training.env
source /opt/ml/input/sm_training.env
CMD="%s"
echo "Executing command: $CMD"
eval $CMD
echo "Training Container Execution Completed"
"""


def drivers():
    """The files of the sm_drivers channel, by path, as ModelTrainer puts them
    in its temporary directory: the SDK's own with SAGEMAKER_SDK_SOURCE."""
    command = " ".join(COMMAND.split())  # _prepare_train_script's base_command
    source = {"source_dir": None, "requirements": None, "entry_script": None, "command": COMMAND,
              "ignore_patterns": [".env", ".git", "__pycache__", ".DS_Store", ".cache", ".ipynb_checkpoints"]}
    files = {"sourcecode.json": json.dumps(source).encode(), "distributed.json": b"{}"}
    if not SDK:
        files["sm_train.sh"] = (STAND_IN % command).encode()
        return files
    train = os.path.join(SDK, "sagemaker-train", "src", "sagemaker", "train")
    top = os.path.join(train, "container_drivers")
    for d, _, names in os.walk(top):
        for n in names:
            if "__pycache__" not in d:
                with open(os.path.join(d, n), "rb") as f:
                    files[os.path.relpath(os.path.join(d, n), top)] = f.read()
    with open(os.path.join(SDK, "sagemaker-core", "src", "sagemaker", "core", "utils", "install_requirements.py"), "rb") as f:
        files["scripts/install_requirements.py"] = f.read()
    spec = importlib.util.spec_from_file_location("sdk_templates", os.path.join(train, "templates.py"))
    templates = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(templates)  # the module has no imports: it is the SDK's text
    files["sm_train.sh"] = templates.TRAIN_SCRIPT_TEMPLATE.format(
        working_dir="", install_requirements="",
        execute_driver=templates.EXECUTE_BASE_COMMANDS.format(base_command=command)).encode()
    return files


def upload_drivers(name):
    """create_input_data_channel(SM_DRIVERS, temp dir): upload_data of each
    file under BASE/NAME/input/sm_drivers/; the channel's S3Uri is that prefix."""
    prefix = "%s/%s/input/sm_drivers" % (BASE, name)
    for path, body in sorted(drivers().items()):
        s3.put_object(Bucket=BUCKET, Key=prefix + "/" + path, Body=body)
    return "s3://%s/%s" % (BUCKET, prefix)


def training_payload():
    stamp = datetime.datetime.now().strftime("%Y-%m-%d-%H-%M-%S-%f")[:-3]
    name = BASE + "-" + stamp
    return {
        "TrainingJobName": name,
        "AlgorithmSpecification": {"TrainingImage": "763104351884.dkr.ecr.%s.amazonaws.com/pytorch-training:2.5-gpu-py311" % REGION,
                                   "TrainingInputMode": "File", "ContainerEntrypoint": ["/bin/bash"],
                                   "ContainerArguments": ["-c", "chmod +x %s/sm_train.sh && %s/sm_train.sh" % (SM_DRIVERS, SM_DRIVERS)]},
        "HyperParameters": {},
        "InputDataConfig": [{"ChannelName": "sm_drivers", "InputMode": "File", "DataSource": {"S3DataSource": {
            "S3DataType": "S3Prefix", "S3DataDistributionType": "FullyReplicated",
            "S3Uri": upload_drivers(name)}}}],
        "ResourceConfig": {"VolumeSizeInGB": 30, "InstanceCount": 1, "InstanceType": INSTANCE_TYPE},
        "RoleArn": role_arn,
        "StoppingCondition": {"MaxRuntimeInSeconds": 300},
        "OutputDataConfig": {"S3OutputPath": "s3://%s/%s" % (BUCKET, BASE), "CompressionType": "GZIP"},
    }


# TrainingQueue.submit -> _submit_service_job (batch_api_helper.py).
RETRY = {"attempts": 1, "evaluateOnExit": [
    {"action": "RETRY", "onStatusReason": "Received status from SageMaker:InternalServerError: We encountered an internal error. Please try again."},
    {"action": "EXIT", "onStatusReason": "*"}]}


def submit(job_name, share, priority):
    payload = training_payload()
    payload.pop("Tags", None)
    req = {"jobName": job_name, "jobQueue": JQ, "retryStrategy": RETRY, "serviceJobType": "SAGEMAKER_TRAINING",
           "serviceRequestPayload": json.dumps(payload), "timeoutConfig": {"attemptDurationSeconds": 86400}}
    if priority:
        req["schedulingPriority"] = priority
    if share:
        req["quotaShareName"] = share
    resp = batch.submit_service_job(**req)
    expect("jobArn" in resp and "jobName" in resp, "submit answers jobArn and jobName")
    return resp["jobArn"]


def status(arn):
    return batch.describe_service_job(jobId=arn)["status"]


DISPATCHED = {"SCHEDULED", "STARTING", "RUNNING"}
TERMINAL = {"SUCCEEDED", "FAILED"}

high, med, low = submit("qs1_job_high", "QS1", 3), submit("qs1_job_med", "QS1", 2), submit("qs1_job_low", "QS1", 1)
poll("two QS1 jobs dispatched", lambda: status(high) in DISPATCHED | TERMINAL and status(med) in DISPATCHED | TERMINAL)
expect(status(low) == "RUNNABLE", "qs1_job_low waits: " + status(low))
step("qs1-two-dispatched")

qs2 = submit("qs2_job_1", "QS2", 1)
poll("QS2 reclaims", lambda: status(qs2) in DISPATCHED | TERMINAL and status(med) == "RUNNABLE")
d = batch.describe_service_job(jobId=med)
expect(d["preemptionSummary"]["recentPreemptedAttempts"][0]["statusReason"].startswith("Preempted"), "med's attempt was preempted")
step("qs2-reclaims", d["preemptionSummary"]["recentPreemptedAttempts"][0]["statusReason"][:60])

batch.update_service_job(jobId=low, schedulingPriority=4)  # TrainingQueuedJob.update
poll("in-share preemption", lambda: status(low) in DISPATCHED | TERMINAL and status(high) == "RUNNABLE")
step("priority-preempts-in-share")

# list_jobs_by_quota_share (the notebook's utils), through TrainingQueue.list_jobs_by_share.
def list_service_jobs(**kw):
    out, token = [], None
    while True:
        page = batch.list_service_jobs(jobQueue=JQ, **kw, **({"nextToken": token} if token else {}))
        out += page.get("jobSummaryList", [])
        token = page.get("nextToken")
        if not token:
            return out


by_share = {qs: [j["jobArn"] for st in ("RUNNABLE", "SCHEDULED", "STARTING", "RUNNING")
                 for j in list_service_jobs(jobStatus=st, filters=[{"name": "QUOTA_SHARE_NAME", "values": [qs]}])]
            for qs in ("QS1", "QS2", "QS3")}
expect(set(by_share["QS1"]) == {high, med, low} and by_share["QS2"] == [qs2] and by_share["QS3"] == [], "jobs by share: %s" % by_share)
named = list_service_jobs(filters=[{"name": "JOB_NAME", "values": ["qs1_job_low"]}])  # TrainingQueue.list_jobs / get_job
expect([j["jobArn"] for j in named] == [low], "list_jobs by name")
step("list-jobs")

# The jobs then run to the end.
for arn in (high, med, low, qs2):
    poll("SUCCEEDED", lambda: status(arn) in TERMINAL, timeout=120)
    expect(status(arn) == "SUCCEEDED", "job ends SUCCEEDED: " + status(arn))
elapsed = time.time() - t0
step("all-succeeded")

# --- TrainingQueuedJob.get_model_trainer(): the latest attempt's training job.
d = batch.describe_service_job(jobId=low)
tj_arn = d["latestAttempt"]["serviceResourceId"]["value"]
m = re.match("arn:aws[a-z-]*:sagemaker:[a-z0-9-]*:[0-9]{12}:training-job/(.+)", tj_arn)
expect(m is not None, "the training job ARN has the SDK's form: " + tj_arn)
tj_name = m.group(1)
expect(len(tj_name) <= 63, "the training job name fits 63 characters")
tj = sm.describe_training_job(TrainingJobName=tj_name)
expect(tj["TrainingJobStatus"] == "Completed" and tj["SecondaryStatus"] == "Completed", "the training job is Completed")
expect(tj["RoleArn"] == role_arn and tj["AlgorithmSpecification"]["TrainingImage"].endswith("pytorch-training:2.5-gpu-py311")
       and tj["ResourceConfig"]["InstanceType"] == INSTANCE_TYPE and tj["StoppingCondition"]["MaxRuntimeInSeconds"] == 300,
       "the request's own fields come back")
expect(tj["ModelArtifacts"]["S3ModelArtifacts"] == "s3://%s/%s/%s/output/model.tar.gz" % (BUCKET, BASE, tj_name), "ModelArtifacts")
expect([t["Status"] for t in tj["SecondaryStatusTransitions"]] == ["Starting", "Downloading", "Training", "Uploading", "Completed"], "transitions")
expect(tj["BillableTimeInSeconds"] >= 1, "BillableTimeInSeconds")
# TrainingJob.wait(logs=True): the streams of "<job>/" and each from its head.
streams = logs.describe_log_streams(logGroupName="/aws/sagemaker/TrainingJobs", logStreamNamePrefix=tj_name + "/", orderBy="LogStreamName")["logStreams"]
expect(len(streams) == 1 and streams[0]["logStreamName"].startswith(tj_name + "/algo-1-"), "one stream per instance")
ev = logs.get_log_events(logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=streams[0]["logStreamName"], startFromHead=True)
again = logs.get_log_events(logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=streams[0]["logStreamName"], startFromHead=True, nextToken=ev["nextForwardToken"])
expect(again["events"] == [] and again["nextForwardToken"] == ev["nextForwardToken"], "the tailer's last page is empty with the same token")
step("get-model-trainer", tj_name)

if EXECUTOR == "process":
    # The program's own output, in the stream that wait(logs=True) prints, with a time per line.
    lines = [e["message"] for e in ev["events"]]
    expect("Hello World" in lines, "the job's CloudWatch Logs stream has the line Hello World: %s" % lines[-20:])
    stamps = [e["timestamp"] for e in ev["events"]]
    expect(stamps == sorted(stamps) and tj["TrainingStartTime"].timestamp() * 1000 - 1000 <= stamps[0]
           and stamps[-1] <= tj["TrainingEndTime"].timestamp() * 1000 + 1000, "the events' times are in order, within the training job's")
    # The model, where ModelArtifacts says: a gzipped tar (empty: echo writes no model).
    uri = urllib.parse.urlparse(tj["ModelArtifacts"]["S3ModelArtifacts"])
    body = s3.get_object(Bucket=uri.netloc, Key=uri.path.lstrip("/"))["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
        members = tar.getnames()
    step("program-output", "Hello World in %s; model.tar.gz of %d bytes, %d files" % (streams[0]["logStreamName"], len(body), len(members)))

# --- TrainingQueue.map: one submit per input, then terminate (TrainingQueuedJob.terminate).
mapped = [submit(n, "QS3", None) for n in ("map-0", "map-1")]
poll("a mapped job runs", lambda: status(mapped[0]) in DISPATCHED)
batch.terminate_service_job(jobId=mapped[0], reason="Default terminate reason")
poll("terminated", lambda: status(mapped[0]) == "FAILED")
d = batch.describe_service_job(jobId=mapped[0])
expect(d["isTerminated"] and d["statusReason"].startswith("Default terminate reason"), "terminate's reason")
# StopTrainingJob of the other's training job: the same terminate.
poll("the second mapped job runs", lambda: status(mapped[1]) in DISPATCHED)
name1 = batch.describe_service_job(jobId=mapped[1])["latestAttempt"]["serviceResourceId"]["value"].split("/")[-1]
sm.stop_training_job(TrainingJobName=name1)
poll("stopped", lambda: status(mapped[1]) == "FAILED")
expect(sm.describe_training_job(TrainingJobName=name1)["TrainingJobStatus"] == "Stopped", "the stopped training job is Stopped")
expect(code_of(lambda: sm.create_training_job(TrainingJobName="x", RoleArn=role_arn, AlgorithmSpecification={"TrainingInputMode": "File"},
                                                OutputDataConfig={"S3OutputPath": "s3://b/o"}, ResourceConfig={"VolumeSizeInGB": 1},
                                                StoppingCondition={})) == "ValidationException", "CreateTrainingJob is refused")
listed = [s["TrainingJobName"] for s in sm.list_training_jobs(NameContains="hello-world-simple", MaxResults=100)["TrainingJobSummaries"]]
expect(tj_name in listed and name1 in listed, "ListTrainingJobs lists the attempts")
step("map-terminate-stop")
print("elapsed %.2f" % elapsed, flush=True)
