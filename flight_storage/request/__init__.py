"""Request decoding: statements, parameters, S3 requests and table names into engine inputs."""
