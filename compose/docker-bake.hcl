# Every image of the container path for amd64 and arm64, from the repository root:
#   docker buildx bake -f compose/docker-bake.hcl                 (all, both arches)
#   docker buildx bake -f compose/docker-bake.hcl app-granian     (one server)
#   PLATFORMS=linux/arm64 docker buildx bake -f compose/docker-bake.hcl --load app-uvicorn
# A multi-platform build needs --push (or a registry-backed cache): the local image store
# holds one platform. The server list is every servers/<id> with a requirements.txt
# (tests/compose checks it against the registry); nginx-static has no app image.

variable "PLATFORMS" {
  default = "linux/amd64,linux/arm64"
}

variable "TAG_PREFIX" {
  default = "pywebbench/"
}

group "default" {
  targets = ["app", "postgres", "pgbouncer", "upstream", "locust"]
}

target "_common" {
  context    = "."
  dockerfile = "compose/Dockerfile"
  platforms  = split(",", PLATFORMS)
}

target "app" {
  name     = "app-${server}"
  inherits = ["_common"]
  matrix = {
    server = [
      "flask-dev",
      "granian",
      "granian-asgi",
      "gunicorn-eventlet",
      "gunicorn-gevent",
      "gunicorn-gthread",
      "gunicorn-sync",
      "gunicorn-uvicorn",
      "hypercorn",
      "meinheld",
      "uvicorn",
      "uwsgi",
      "waitress",
    ]
  }
  target = "app"
  args   = { SERVER = server }
  tags   = ["${TAG_PREFIX}app-${server}"]
}

target "postgres" {
  inherits = ["_common"]
  target   = "postgres"
  tags     = ["${TAG_PREFIX}postgres:15"]
}

target "pgbouncer" {
  inherits = ["_common"]
  target   = "pgbouncer"
  tags     = ["${TAG_PREFIX}pgbouncer"]
}

target "upstream" {
  inherits = ["_common"]
  target   = "upstream"
  tags     = ["${TAG_PREFIX}upstream"]
}

target "locust" {
  inherits = ["_common"]
  target   = "locust"
  tags     = ["${TAG_PREFIX}locust"]
}
