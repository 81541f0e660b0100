"""Drives a qshare server through boto3, as a SageMaker or platform script would.

Usage: boto3_check.py ENDPOINT QUEUE_ARN SHARE PAYLOAD_FILE
Prints one line per check; exits non-zero on the first failure.
"""
import json
import sys

import boto3
import botocore.exceptions

endpoint, queue, share, payload_file = sys.argv[1:5]
c = boto3.client("batch", endpoint_url=endpoint, region_name="us-east-1",
                 aws_access_key_id="qshare", aws_secret_access_key="qshare")
payload = open(payload_file).read()

# Operations with an empty input: boto3 sends them as the SDK does.
c.list_scheduling_policies()
c.describe_service_environments()
c.describe_job_queues()
print("empty inputs: ok")

j = c.submit_service_job(jobName="boto3", jobQueue=queue, quotaShareName=share,
                         schedulingPriority=3, serviceJobType="SAGEMAKER_TRAINING",
                         serviceRequestPayload=payload)
c.update_service_job(jobId=j["jobId"], schedulingPriority=7)
got = c.describe_service_job(jobId=j["jobId"])
assert got["schedulingPriority"] == 7, got
print("submit, update, describe: ok")

c.tag_resource(resourceArn=queue, tags={"team": "a"})
assert c.list_tags_for_resource(resourceArn=queue)["tags"] == {"team": "a"}
c.untag_resource(resourceArn=queue, tagKeys=["team"])
print("tags: ok")

bad = json.loads(payload)
bad["Environment"] = {"QSHARE_SUPERVISE": "1"}
try:
    c.submit_service_job(jobName="bad", jobQueue=queue, quotaShareName=share,
                         serviceJobType="SAGEMAKER_TRAINING", serviceRequestPayload=json.dumps(bad))
    sys.exit("a payload that sets QSHARE_SUPERVISE was accepted")
except botocore.exceptions.ClientError as e:
    assert e.response["Error"]["Code"] == "ClientException", e.response
    assert "QSHARE_SUPERVISE" in e.response["Error"]["Message"], e.response
print("refusal read as ClientException: ok")
c.terminate_service_job(jobId=j["jobId"], reason="done")
