package container

import (
	"os"

	"github.com/distribution/reference"
	"github.com/docker/cli/cli/config"
	"github.com/moby/moby/api/pkg/authconfig"
	"github.com/moby/moby/api/types/registry"
)

// dockerHub is the key of Docker Hub's credentials in a Docker config
// file, as the Docker CLI writes it.
const dockerHub = "https://index.docker.io/v1/"

// registryAuth returns the engine's X-Registry-Auth value for pulling img:
// the credentials of img's registry from the Docker config file
// ($DOCKER_CONFIG/config.json, else ~/.docker/config.json of the server's
// user), through its credential helpers (credsStore, credHelpers, such as
// ECR's docker-credential-ecr-login) as the Docker CLI reads them. No
// credentials is "": the pull goes anonymously.
func registryAuth(img string) (string, error) {
	named, err := reference.ParseNormalizedNamed(img)
	if err != nil {
		return "", err
	}
	host := reference.Domain(named)
	if host == "docker.io" {
		host = dockerHub
	}
	// DOCKER_CONFIG as it is now: config.Dir is the one read at start.
	dir := os.Getenv(config.EnvOverrideConfigDir)
	if dir == "" {
		dir = config.Dir()
	}
	cf, err := config.Load(dir)
	if err != nil {
		return "", err
	}
	ac, err := cf.GetAuthConfig(host)
	if err != nil {
		return "", err
	}
	if ac.Username == "" && ac.Password == "" && ac.IdentityToken == "" && ac.RegistryToken == "" && ac.Auth == "" {
		return "", nil
	}
	return authconfig.Encode(registry.AuthConfig{Username: ac.Username, Password: ac.Password, Auth: ac.Auth,
		ServerAddress: ac.ServerAddress, IdentityToken: ac.IdentityToken, RegistryToken: ac.RegistryToken})
}
