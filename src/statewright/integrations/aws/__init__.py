"""AWS service integrations through botocore: the clients (``clients``), the catalogue of services and actions
botocore models (``catalogue``), and the Task integrations built on them."""
