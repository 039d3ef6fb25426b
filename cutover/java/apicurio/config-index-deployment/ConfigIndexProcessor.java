package apicurio.common.app.components.config.index.deployment;

import java.util.ArrayList;
import java.util.List;

import org.jboss.jandex.AnnotationInstance;
import org.jboss.jandex.AnnotationValue;
import org.jboss.jandex.DotName;
import org.jboss.jandex.Type;

import apicurio.common.app.components.config.index.DynamicPropertiesInfoRecorder;
import io.apicurio.common.apps.config.DynamicConfigPropertyDef;
import io.apicurio.common.apps.config.DynamicConfigPropertyList;
import io.quarkus.arc.deployment.BeanDiscoveryFinishedBuildItem;
import io.quarkus.arc.deployment.SyntheticBeanBuildItem;
import io.quarkus.arc.processor.InjectionPointInfo;
import io.quarkus.deployment.annotations.BuildProducer;
import io.quarkus.deployment.annotations.BuildStep;
import io.quarkus.deployment.annotations.ExecutionTime;
import io.quarkus.deployment.annotations.Record;
import io.quarkus.runtime.RuntimeValue;

/**
 * Stand-in for the unpublished upstream deployment module: every injected field annotated with
 * {@code @ConfigProperty} and {@code @io.apicurio.common.apps.config.Dynamic} (type {@code Supplier<T>})
 * becomes a {@link DynamicConfigPropertyDef} in the synthetic {@link DynamicConfigPropertyList} bean.
 */
class ConfigIndexProcessor {

    static final DotName CONFIG_PROPERTY = DotName.createSimple("org.eclipse.microprofile.config.inject.ConfigProperty");
    static final DotName DYNAMIC = DotName.createSimple("io.apicurio.common.apps.config.Dynamic");

    @BuildStep
    @Record(ExecutionTime.RUNTIME_INIT)
    void syntheticBean(DynamicPropertiesInfoRecorder recorder, BeanDiscoveryFinishedBuildItem beanDiscovery,
            BuildProducer<SyntheticBeanBuildItem> syntheticBeans) throws Exception {
        List<DynamicConfigPropertyDef> defs = new ArrayList<>();
        for (InjectionPointInfo ip : beanDiscovery.getInjectionPoints()) {
            if (!ip.isField() || ip.getRequiredQualifier(CONFIG_PROPERTY) == null
                    || ip.getTarget().asField().annotation(DYNAMIC) == null) {
                continue;
            }
            AnnotationInstance cp = ip.getRequiredQualifier(CONFIG_PROPERTY);
            AnnotationInstance dyn = ip.getTarget().asField().annotation(DYNAMIC);
            Type actual = ip.getRequiredType().asParameterizedType().arguments().get(0);
            String name = cp.value("name").asString();
            AnnotationValue dv = cp.value("defaultValue");
            if (dv == null) {
                throw new IllegalStateException("Dynamic configuration property '" + name + "' must have a default value.");
            }
            Class<?> type = Class.forName(actual.name().toString(), false, Thread.currentThread().getContextClassLoader());
            DynamicConfigPropertyDef def = new DynamicConfigPropertyDef(name, type, dv.asString());
            AnnotationValue label = dyn.value("label");
            AnnotationValue description = dyn.value("description");
            AnnotationValue requires = dyn.value("requires");
            if (label != null) def.setLabel(label.asString());
            if (description != null) def.setDescription(description.asString());
            if (requires != null) def.setRequires(requires.asStringArray());
            defs.add(def);
        }
        RuntimeValue<DynamicConfigPropertyList> value = recorder.initializePropertiesInfo(defs);
        syntheticBeans.produce(SyntheticBeanBuildItem.configure(DynamicConfigPropertyList.class)
                .runtimeValue(value).unremovable().setRuntimeInit().done());
    }
}
